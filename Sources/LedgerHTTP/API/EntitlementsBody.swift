import Foundation
import LedgerApplication
import LedgerDomain

/// What a user may use at an instant, in the one JSON shape the ledger answers with: after a
/// receipt or a restore, from `GET …/entitlements` and from `ledger query entitlements`. It maps
/// the domain's `Entitlements` and decides nothing itself.
public struct EntitlementsBody: Encodable, Sendable {
    struct Owned: Encodable, Sendable {
        let productId: String
        let productType: String
        let originalTransactionId: String
        let ownedSince: Date
    }

    struct Subscription: Encodable, Sendable {
        let productId: String
        let group: String
        let kind: String
        let active: Bool
        let activeUntil: Date?
        let expiresAt: Date
    }

    struct Consumable: Encodable, Sendable {
        let productId: String
        let balance: Int64
    }

    let userId: String
    let at: Date
    /// The log position the answer reflects.
    let position: Int64
    let owned: [Owned]
    let subscriptions: [Subscription]
    let consumables: [Consumable]

    public init(userId: String, position: Int64, _ entitlements: Entitlements) {
        self.userId = userId
        self.at = entitlements.at
        self.position = position
        owned = entitlements.owned.map {
            Owned(productId: $0.productId, productType: $0.productType.rawValue, originalTransactionId: $0.originalTransactionId,
                  ownedSince: $0.ownedSince)
        }
        subscriptions = entitlements.subscriptions.map {
            Subscription(productId: $0.productId, group: $0.group, kind: $0.kind.rawValue, active: $0.isActive,
                         activeUntil: $0.activeUntil, expiresAt: $0.expiresAt)
        }
        consumables = entitlements.consumables.map { Consumable(productId: $0.productId, balance: Int64($0.balance)) }
    }

    /// After a command: the user's stream as the command left it (judged with `catalog`).
    init(userId: String, position: Int64, state: UserLedger, catalog: ProductCatalog, at instant: Date = Date()) {
        self.init(userId: userId, position: position, state.entitlements(catalog: catalog, at: instant))
    }
}

extension EntitlementsBody {
    /// The body as `APIJSON`'s encoder writes it (keys sorted, slashes unescaped), written
    /// directly: the entitlements read is the hottest route, and Foundation's encoder took a fifth
    /// of its time. `EntitlementsBodyTests` checks that both give the same bytes.
    func json() -> Data {
        var out = JSONText()
        out.object { o in
            o.field("at") { $0.date(at) }
            o.field("consumables") { $0.array(consumables) { item, c in
                item.object { o in
                    o.field("balance") { $0.number(c.balance) }
                    o.field("productId") { $0.string(c.productId) }
                }
            } }
            o.field("owned") { $0.array(owned) { item, owned in
                item.object { o in
                    o.field("originalTransactionId") { $0.string(owned.originalTransactionId) }
                    o.field("ownedSince") { $0.date(owned.ownedSince) }
                    o.field("productId") { $0.string(owned.productId) }
                    o.field("productType") { $0.string(owned.productType) }
                }
            } }
            o.field("position") { $0.number(position) }
            o.field("subscriptions") { $0.array(subscriptions) { item, s in
                item.object { o in
                    o.field("active") { $0.bool(s.active) }
                    if let until = s.activeUntil { o.field("activeUntil") { $0.date(until) } }
                    o.field("expiresAt") { $0.date(s.expiresAt) }
                    o.field("group") { $0.string(s.group) }
                    o.field("kind") { $0.string(s.kind) }
                    o.field("productId") { $0.string(s.productId) }
                }
            } }
            o.field("userId") { $0.string(userId) }
        }
        return Data(out.text.utf8)
    }
}

/// JSON written by hand, in the form `APIJSON.makeEncoder()` gives: the caller writes keys in
/// sorted order, strings are escaped as Foundation escapes them (quote, backslash, control
/// characters; slashes left alone), dates as `LedgerJSON.formatTimestamp` writes them.
struct JSONText {
    var text = ""

    struct Object {
        var text: JSONText
        var first = true

        mutating func field(_ key: String, _ value: (inout JSONText) -> Void) {
            text.text += first ? "" : ","
            first = false
            text.string(key)
            text.text += ":"
            value(&text)
        }
    }

    mutating func object(_ fields: (inout Object) -> Void) {
        var object = Object(text: self)
        text = ""  // the object's copy is then the only one: appending does not copy it
        object.text.text += "{"
        fields(&object)
        object.text.text += "}"
        self = object.text
    }

    mutating func array<Element>(_ elements: [Element], _ write: (inout JSONText, Element) -> Void) {
        text += "["
        for (index, element) in elements.enumerated() {
            if index > 0 { text += "," }
            write(&self, element)
        }
        text += "]"
    }

    mutating func number(_ value: Int64) { text += String(value) }
    mutating func bool(_ value: Bool) { text += value ? "true" : "false" }
    mutating func date(_ value: Date) { string(LedgerJSON.formatTimestamp(value)) }

    mutating func string(_ value: String) { LedgerJSON.appendQuoted(value, to: &text) }
}
