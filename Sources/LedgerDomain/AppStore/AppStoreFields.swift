import Foundation

/// Reads the fields of a transaction or a renewal-info entry as the App Store wrote them.
///
/// Dates come from the `*_ms` field (milliseconds since 1970) when there is one; flags are
/// `"true"`/`"1"`. Reading is lenient about shape and strict about meaning: a field that is there
/// but unreadable counts as absent, and the raw text stays in the log for a later fix.
public struct AppStoreFields: Hashable, Sendable {
    public let values: [String: String]

    /// The transaction fields below, read once here: the classifier reads them for every
    /// transaction of a user on every fold, and reading them from `values` each time was a large
    /// part of its cost.
    public init(_ values: [String: String]) {
        self.values = values
        transactionId = Self.text(values, "transaction_id")
        originalTransactionId = Self.text(values, "original_transaction_id")
        productId = Self.text(values, "product_id")
        quantity = max(Self.text(values, "quantity").flatMap { Int($0) } ?? 1, 1)
        purchaseDate = Self.date(values, "purchase_date")
        expiresDate = Self.date(values, "expires_date")
        cancellationDate = Self.date(values, "cancellation_date")
        cancellationReason = Self.text(values, "cancellation_reason").flatMap { Int($0) }
        webOrderLineItemId = Self.text(values, "web_order_line_item_id")
        isTrialPeriod = Self.flag(values, "is_trial_period")
        isInIntroOfferPeriod = Self.flag(values, "is_in_intro_offer_period")
        isUpgraded = Self.flag(values, "is_upgraded")
        isFamilyShared = Self.text(values, "in_app_ownership_type") == "FAMILY_SHARED"
    }

    private static func text(_ values: [String: String], _ key: String) -> String? {
        guard let value = values[key], !value.isEmpty else { return nil }
        return value
    }

    private static func date(_ values: [String: String], _ key: String) -> Date? {
        if let milliseconds = text(values, "\(key)_ms").flatMap(Int64.init), let date = Date(recordableMilliseconds: milliseconds) { return date }
        return text(values, key).flatMap(parseAppleDate)
    }

    private static func flag(_ values: [String: String], _ key: String) -> Bool {
        guard let value = text(values, key)?.lowercased() else { return false }
        return value == "true" || value == "1"
    }

    public subscript(key: String) -> String? {
        Self.text(values, key)
    }

    /// Milliseconds win; dates the ledger cannot record (`Date.recordableMilliseconds`) are unreadable.
    public func date(_ key: String) -> Date? {
        Self.date(values, key)
    }

    public func flag(_ key: String) -> Bool {
        Self.flag(values, key)
    }

    public func int(_ key: String) -> Int? {
        self[key].flatMap { Int($0) }
    }

    // MARK: Transaction fields

    public let transactionId: String?
    public let originalTransactionId: String?
    public let productId: String?
    public let quantity: Int
    public let purchaseDate: Date?
    public let expiresDate: Date?
    public let cancellationDate: Date?
    /// "1": the customer cited a problem with the app; "0": another reason.
    public let cancellationReason: Int?
    public let webOrderLineItemId: String?
    public let isTrialPeriod: Bool
    public let isInIntroOfferPeriod: Bool
    public let isUpgraded: Bool
    /// `FAMILY_SHARED` when a family member's purchase gives the user access.
    public let isFamilyShared: Bool

    /// The fields are the value: what is read from them follows.
    public static func == (lhs: AppStoreFields, rhs: AppStoreFields) -> Bool {
        lhs.values == rhs.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(values)
    }

    /// Apple's `2013-01-01 00:00:00 Etc/GMT` form (the `*_ms` fields are preferred).
    static func parseAppleDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count >= 2 else { return LedgerJSON.parseTimestamp(text) }
        return LedgerJSON.parseTimestamp("\(parts[0])T\(parts[1]).000Z")
    }
}
