import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDomain
import LedgerStore
import LocalPostgres
import Logging

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read the event log.",
        subcommands: [Tail.self]
    )

    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print events as JSON lines, in position order.",
            discussion: """
                Each line: position, streamId, streamVersion, eventId, type, recordedAt, deduplicationKey, data, metadata. \
                Without --follow it prints what is committed and stops; with --follow it keeps going until \
                interrupted, never skipping an event that commits late.
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "First position to print (default: 1, the start of the log).")
        var from: Int64 = 1

        @Option(help: "Only this stream, e.g. user/com.example.app/42.")
        var stream: String?

        @Flag(help: "Keep printing new events as they are committed.")
        var follow = false

        func validate() throws {
            guard from >= 1 else { throw ValidationError("--from must be a position of 1 or more") }
            if let name = stream {
                do {
                    _ = try StreamID(name)
                } catch {
                    throw ValidationError(error.message)
                }
            }
        }

        func run() async throws {
            let logger = try options.makeLogger()
            let stream = try self.stream.map { try StreamID($0) }
            let settings = try await options.databaseSettings(logger: logger)
            let start = from - 1
            let only = stream
            try await LedgerDatabase.withClient(settings, logger: logger) { client in
                let store = PostgresEventStore(client: client, logger: logger)
                if follow {
                    let follower = LogFollower(
                        store: store, listenConfiguration: try settings.connectionConfiguration, logger: logger
                    )
                    try await follower.follow(after: start, stream: only) { events in
                        Self.print(events)
                    }
                } else {
                    var position = start
                    var printed = 0
                    while true {
                        let events = try await store.readAll(after: position, stream: only, limit: 1_000)
                        guard let last = events.last else { break }
                        Self.print(events)
                        printed += events.count
                        position = last.position
                    }
                    if printed == 0, let only {
                        // Nothing on standard output; whoever typed the name is told why.
                        Output.error(start > 0
                            ? "stream '\(only.rawValue)' has no events from position \(start + 1)"
                            : "stream '\(only.rawValue)' has no events (a user's stream is named user/<bundle id>/<user id>)")
                    }
                }
            }
        }

        static func print(_ events: [RecordedEvent]) {
            Output.line(events.map(\.jsonLine).joined(separator: "\n"))
        }
    }
}

extension RecordedEvent {
    /// One JSON object per line, keys in a fixed order; `data` and `metadata` are embedded as
    /// the JSON they are.
    var jsonLine: String {
        let recorded = recordedAt.formatted(
            .iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted)
        )
        var line = #"{"position":"# + String(position)
        line += #","streamId":"# + Self.quoted(streamID)
        line += #","streamVersion":"# + String(streamVersion)
        line += #","eventId":"# + Self.quoted(eventID.uuidString.lowercased())
        line += #","type":"# + Self.quoted(type)
        line += #","recordedAt":"# + Self.quoted(recorded)
        line += #","deduplicationKey":"# + (deduplicationKey.map(Self.quoted) ?? "null")
        line += #","data":"# + data + #","metadata":"# + metadata + "}"
        return line
    }

    private static func quoted(_ text: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return (try? encoder.encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }
}
