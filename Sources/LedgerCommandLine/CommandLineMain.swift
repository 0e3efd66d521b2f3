import ArgumentParser
import Foundation
import PostgresNIO

extension AsyncParsableCommand {
    /// Runs the chosen command; database errors are shown with the server's own message, which
    /// postgres-nio hides from `description` by default.
    public static func runReportingDatabaseErrors() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as PSQLError {
            let server = error.serverInfo
            var message = "PostgreSQL refused: \(server?[.message] ?? "\(error.code)")"
            if let detail = server?[.detail] { message += " (\(detail))" }
            if let hint = server?[.hint] { message += "; \(hint)" }
            exit(withError: CommandFailure(message: message))
        } catch {
            exit(withError: error)
        }
    }
}
