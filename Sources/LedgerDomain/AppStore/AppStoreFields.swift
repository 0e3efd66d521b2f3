import Foundation

/// Reads the fields of a transaction or a renewal-info entry as the App Store wrote them.
///
/// Dates come from the `*_ms` field (milliseconds since 1970) when there is one; flags are
/// `"true"`/`"1"`. Reading is lenient about shape and strict about meaning: a field that is there
/// but unreadable counts as absent, and the raw text stays in the log for a later fix.
public struct AppStoreFields: Hashable, Sendable {
    public let values: [String: String]

    public init(_ values: [String: String]) {
        self.values = values
    }

    public subscript(key: String) -> String? {
        guard let value = values[key], !value.isEmpty else { return nil }
        return value
    }

    /// Milliseconds win; dates the ledger cannot record (`Date.recordableMilliseconds`) are unreadable.
    public func date(_ key: String) -> Date? {
        if let milliseconds = self["\(key)_ms"].flatMap(Int64.init), let date = Date(recordableMilliseconds: milliseconds) { return date }
        return self[key].flatMap(Self.parseAppleDate)
    }

    public func flag(_ key: String) -> Bool {
        guard let value = self[key]?.lowercased() else { return false }
        return value == "true" || value == "1"
    }

    public func int(_ key: String) -> Int? {
        self[key].flatMap { Int($0) }
    }

    // MARK: Transaction fields

    public var transactionId: String? { self["transaction_id"] }
    public var originalTransactionId: String? { self["original_transaction_id"] }
    public var productId: String? { self["product_id"] }
    public var quantity: Int { max(int("quantity") ?? 1, 1) }
    public var purchaseDate: Date? { date("purchase_date") }
    public var expiresDate: Date? { date("expires_date") }
    public var cancellationDate: Date? { date("cancellation_date") }
    /// "1": the customer cited a problem with the app; "0": another reason.
    public var cancellationReason: Int? { int("cancellation_reason") }
    public var webOrderLineItemId: String? { self["web_order_line_item_id"] }
    public var isTrialPeriod: Bool { flag("is_trial_period") }
    public var isInIntroOfferPeriod: Bool { flag("is_in_intro_offer_period") }
    public var isUpgraded: Bool { flag("is_upgraded") }
    /// `FAMILY_SHARED` when a family member's purchase gives the user access.
    public var isFamilyShared: Bool { self["in_app_ownership_type"] == "FAMILY_SHARED" }

    /// Apple's `2013-01-01 00:00:00 Etc/GMT` form (the `*_ms` fields are preferred).
    static func parseAppleDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count >= 2 else { return LedgerJSON.parseTimestamp(text) }
        return LedgerJSON.parseTimestamp("\(parts[0])T\(parts[1]).000Z")
    }
}
