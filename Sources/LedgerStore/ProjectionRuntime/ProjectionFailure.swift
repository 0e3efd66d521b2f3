import LedgerApplication
import LedgerDomain
import PostgresNIO

/// Why a projection stopped, and at which position: recorded in `ledger.projections` (status
/// `failed`, `error`, `error_position`) and shown by `/health` and `ledger projections status`.
struct ProjectionFailure: Error, CustomStringConvertible {
    let message: String
    let position: Int64?
    var description: String { message }
}

/// Another runner moved the checkpoint; retried from the new one, not a failure.
struct CheckpointMoved: Error, CustomStringConvertible {
    let projection: String
    var description: String { "another runner moved the checkpoint of \(projection); continuing from its position" }
}

extension ProjectionFailure {
    /// The failure `error` means for a projection, or nil when it is transient and worth retrying.
    ///
    /// Deterministic: the same batch would fail the same way on every attempt. These are the
    /// ledger's own decoding and folding errors, and the database's refusals of the rows or the
    /// statements (a constraint, a type, a missing table or privilege). Transient: the database
    /// could not answer (a connection lost or refused, the server starting or shutting down, out of
    /// connections or disk), or the statement lost a race it can win next time (a serialization
    /// failure, a deadlock, a lock or statement timeout). An error of no kind known here comes from
    /// the transport (the pool, NIO), never from the projection's data, so it is retried: a
    /// projection that keeps retrying stops moving, and `/health` reports the stall.
    ///
    /// - Parameter batch: the positions the failing batch held, when there was one.
    static func judging(_ error: any Error, batch: ClosedRange<Int64>? = nil) -> ProjectionFailure? {
        let place = batch.map { $0.lowerBound == $0.upperBound ? "at position \($0.lowerBound)" : "in positions \($0.lowerBound)–\($0.upperBound)" }
        switch error {
        case let failure as ProjectionFailure:
            return failure
        case is CheckpointMoved, is CancellationError:
            return nil
        case let error as PSQLError:
            guard !isTransient(error) else { return nil }
            let info = error.serverInfo
            var message = "the database refused the projection's rows\(place.map { " " + $0 } ?? ""): \(info?[.message] ?? "\(error.code)")"
            if let state = info?[.sqlState] { message += " (SQLSTATE \(state))" }
            if let detail = info?[.detail] { message += "; \(detail)" }
            return ProjectionFailure(message: message, position: batch?.lowerBound)
        case let error as StoreError where error.code == .databaseUnavailable:
            return nil
        case is StoreError, is DecodingError, is PostgresDecodingError, is LedgerInputError, is UnknownEventType:
            return ProjectionFailure(
                message: "cannot apply the events \(place ?? "after the checkpoint"): \(error)", position: batch?.lowerBound
            )
        default:
            return nil
        }
    }

    /// SQLSTATE classes and codes of conditions that pass: connection exceptions (08), transaction
    /// rollbacks (40: serialization failure, deadlock), insufficient resources (53), operator
    /// intervention (57: cancelled, statement timeout, shutdown, starting up), system errors (58),
    /// a refused login or a database that is not there (28, 3D: the connection's settings, not the
    /// projection's data), a lock not available (55P03) or a session ended for idling in a
    /// transaction (25P03). Errors without a SQLSTATE are the connection's, except a statement
    /// with too many parameters.
    static func isTransient(_ error: PSQLError) -> Bool {
        guard error.code == .server else {
            return error.code != .tooManyParameters && error.code != .invalidCommandTag
        }
        guard let state = error.serverInfo?[.sqlState] else { return true }
        return ["08", "28", "3D", "40", "53", "57", "58"].contains(String(state.prefix(2))) || state == "55P03" || state == "25P03"
    }
}
