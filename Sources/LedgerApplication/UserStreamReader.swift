import Foundation
import LedgerDomain

/// Reads what the log says of one user of an app: the user's stream folded into a `UserLedger`,
/// and the app's catalog, at the log's end or at any past point.
///
/// The one reader of both: the command handler decides on what it returns, the projection runner
/// derives rows from it, and `ledger query` answers from it. A stream holding an event type this
/// version does not know is an error here, for every caller alike, never silently skipped.
public struct UserStreamReader<Store: EventStore>: Sendable {
    let store: Store

    public init(store: Store) {
        self.store = store
    }

    /// The user's stream folded to its end, or up to log `position` for answers about the past,
    /// its transactions judged with the app's catalog as of the same position.
    public func state(app bundleID: String, user userID: String, upToPosition position: Int64 = .max) async throws -> UserLedger {
        let catalog = try await catalog(app: bundleID, upToPosition: position)
        return try await state(of: StreamID.user(app: bundleID, user: userID), upToPosition: position, catalog: catalog)
    }

    /// A user stream folded to its end, or up to log `position`, judged with `catalog` (which the
    /// caller read up to the same position).
    public func state(of stream: StreamID, upToPosition position: Int64 = .max, catalog: ProductCatalog) async throws -> UserLedger {
        try UserLedger(folding: try await readWhole(stream).filter { $0.position <= position }, catalog: catalog)
    }

    /// The app's catalog, or as of log `position` for replays and answers about the past.
    public func catalog(app bundleID: String, upToPosition position: Int64 = .max) async throws -> ProductCatalog {
        try await catalogStream(app: bundleID, upToPosition: position).catalog
    }

    /// The app's catalog with the events it was folded from (their count is the stream's version;
    /// the last one says where and when it last changed).
    public func catalogStream(
        app bundleID: String, upToPosition position: Int64 = .max
    ) async throws -> (catalog: ProductCatalog, events: [RecordedEvent]) {
        let events = try await readWhole(StreamID.catalog(app: bundleID)).filter { $0.position <= position }
        return (try ProductCatalog(folding: events), events)
    }

    /// Where the product's current definition was recorded in the app's catalog, if it is defined.
    public func definitionPosition(of productID: String, app bundleID: String) async throws -> Int64? {
        for event in try await readWhole(StreamID.catalog(app: bundleID)).reversed() where event.type == ProductDefined.typeName.stored {
            if try LedgerJSON.decode(ProductDefined.self, from: event.data).product.productId == productID { return event.position }
        }
        return nil
    }

    /// The user's stream and the app's catalog as they were once `instant` had passed: only events
    /// recorded by then count.
    public func asOf(app bundleID: String, user userID: String, recordedBy instant: Date) async throws -> (UserLedger, ProductCatalog) {
        let user = try await readWhole(StreamID.user(app: bundleID, user: userID)).filter { $0.recordedAt <= instant }
        let catalog = try await readWhole(StreamID.catalog(app: bundleID)).filter { $0.recordedAt <= instant }
        let products = try ProductCatalog(folding: catalog)
        return (try UserLedger(folding: user, catalog: products), products)
    }

    /// Every event of a stream, in version order.
    func readWhole(_ stream: StreamID) async throws -> [RecordedEvent] {
        var events: [RecordedEvent] = []
        while true {
            let page = try await store.readStream(stream, fromVersion: Int64(events.count) + 1, limit: Self.pageSize)
            events += page
            if page.count < Self.pageSize { return events }
        }
    }

    static var pageSize: Int { 5_000 }
}
