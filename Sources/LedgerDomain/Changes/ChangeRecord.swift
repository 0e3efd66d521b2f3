import Foundation

/// A change as the feed answers it and a webhook POSTs it: where it sits in the log, whose it is,
/// what happened and what the user may use after it. Encoded once, when written, with
/// `LedgerJSON` (keys sorted), and sent as stored.
public struct ChangeRecord: Codable, Hashable, Sendable {
    /// What the user may use after the change, in the shape of `GET …/entitlements`.
    public struct Standing: Codable, Hashable, Sendable {
        public struct Owned: Codable, Hashable, Sendable {
            public let productId: String
            public let productType: String
            public let originalTransactionId: String
            public let ownedSince: Date
        }

        public struct Subscription: Codable, Hashable, Sendable {
            public let productId: String
            public let group: String
            public let kind: String
            public let active: Bool
            public let activeUntil: Date?
            public let expiresAt: Date
        }

        public struct Consumable: Codable, Hashable, Sendable {
            public let productId: String
            public let balance: Int
        }

        public let at: Date
        public let owned: [Owned]
        public let subscriptions: [Subscription]
        public let consumables: [Consumable]

        public init(_ entitlements: Entitlements) {
            at = entitlements.at
            owned = entitlements.owned.map {
                Owned(productId: $0.productId, productType: $0.productType.rawValue, originalTransactionId: $0.originalTransactionId,
                      ownedSince: $0.ownedSince)
            }
            subscriptions = entitlements.subscriptions.map {
                Subscription(productId: $0.productId, group: $0.group, kind: $0.kind.rawValue, active: $0.isActive,
                             activeUntil: $0.activeUntil, expiresAt: $0.expiresAt)
            }
            consumables = entitlements.consumables.map { Consumable(productId: $0.productId, balance: $0.balance) }
        }
    }

    /// `chg_<position>_<seq>`: the same on every delivery of the change, for de-duplication.
    public let id: String
    public let app: String
    public let userId: String
    /// The log position that made the change (a fact, or the clock passing an instant).
    public let position: Int64
    /// Its place among the changes of that position.
    public let seq: Int
    public let type: StandingChange.Kind
    public let occurredAt: Date
    /// When the log recorded what made it.
    public let recordedAt: Date
    public let happened: [StandingChange.Happening]
    public let entitlements: Standing

    public init(app: String, userId: String, position: Int64, seq: Int, recordedAt: Date, change: StandingChange) {
        id = Self.id(position: position, seq: seq)
        self.app = app
        self.userId = userId
        self.position = position
        self.seq = seq
        type = change.type
        occurredAt = change.occurredAt
        self.recordedAt = recordedAt
        happened = change.happened
        entitlements = Standing(change.entitlements)
    }

    public static func id(position: Int64, seq: Int) -> String {
        "chg_\(position)_\(seq)"
    }

    /// The position and seq of an id `id(position:seq:)` made; nil for anything else.
    public static func place(of id: String) -> (position: Int64, seq: Int)? {
        let parts = id.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "chg", let position = Int64(parts[1]), position >= 1, let seq = Int(parts[2]), seq >= 0,
              id == Self.id(position: position, seq: seq)
        else { return nil }
        return (position, seq)
    }

    /// The JSON written to `ledger.changes.body`.
    public func json() throws -> String {
        try LedgerJSON.encode(self)
    }
}
