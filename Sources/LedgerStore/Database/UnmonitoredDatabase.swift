import LedgerApplication

/// `DatabaseAvailability` without a monitor (a server that does not probe its database, tests):
/// up as far as it knows, while errors that show the database unreachable are still told apart.
public struct UnmonitoredDatabase: DatabaseAvailability {
    public init() {}

    public var state: DatabaseState { .up }
    public func waitUntilDown() async {
        // Never seen down: waits until cancelled.
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3_600)) }
    }
    public func reportOutage(_ error: any Error) {}
    public func isOutage(_ error: any Error) -> Bool { DatabaseOutage.isOutage(error) }
    public func isBusy(_ error: any Error) -> Bool { DatabaseOutage.isBusy(error) }
}
