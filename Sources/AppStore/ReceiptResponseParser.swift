import Foundation
import LedgerDomain

/// Turns a `verifyReceipt` answer (status 0 or 21006) into a `VerifiedReceipt`.
///
/// Reads both shapes the service sends. Old transaction receipts carry the transaction at the top of
/// `receipt` and `latest_receipt_info` / `latest_expired_receipt_info` as single objects; app receipts
/// carry `receipt.in_app[]`, `latest_receipt_info[]` and `pending_renewal_info[]`. Each transaction is
/// reported once: where `in_app` and `latest_receipt_info` both list it, the later view wins (it
/// reflects refunds), without losing a cancellation or expiry only one of them shows.
public struct ReceiptResponseParser: Sendable {
    let receiptSHA256: String
    /// The endpoint that answered; used when the answer does not say its environment.
    let answeredBy: StoreEnvironment

    public init(receiptSHA256: String, answeredBy: StoreEnvironment) {
        self.receiptSHA256 = receiptSHA256
        self.answeredBy = answeredBy
    }

    /// Reads a whole `verifyReceipt` answer as the verifier does once the App Store has answered,
    /// without asking the other environment or retrying: a receipt for status 0 or 21006, else the
    /// error the verifier would end with. Every failure is a `ReceiptVerificationError`.
    public func read(_ answer: Data) throws(ReceiptVerificationError) -> VerifiedReceipt {
        let (root, status) = try Self.root(of: answer, from: "the App Store")
        switch status.handling(isRetryable: ReceiptStatus.isRetryableFlag(in: root)) {
        case .valid, .validButExpired:
            do {
                return try parse(root, status: status, answer: answer)
            } catch let error as ReceiptVerificationError {
                throw error
            } catch {
                throw .malformedResponse("\(error)")
            }
        case .retryLater:
            throw .unavailable("the \(answeredBy) App Store answered \(status.code) (\(status.meaning))", status: status)
        case .retryInSandbox, .retryInProduction, .invalid:
            throw .invalidReceipt(status, environment: answeredBy)
        }
    }

    /// The answer's JSON object and its `status`; `source` names who answered, for the message.
    static func root(of answer: Data, from source: String) throws(ReceiptVerificationError) -> (LenientJSON, ReceiptStatus) {
        guard let root = LenientJSON(data: answer), root.object != nil else {
            throw .malformedResponse("the answer from \(source) is not a JSON object")
        }
        guard let code = root["status"].int else {
            throw .malformedResponse("the answer from \(source) has no numeric 'status'")
        }
        return (root, ReceiptStatus(code: code))
    }

    /// `answer` is the answer's body as the App Store sent it, kept as it came.
    func parse(_ root: LenientJSON, status: ReceiptStatus, answer: Data = Data()) throws -> VerifiedReceipt {
        let receipt = root["receipt"]
        guard receipt.object != nil else {
            throw ReceiptVerificationError.malformedResponse("status \(status.code) without a 'receipt' object")
        }
        let isAppReceipt = receipt["in_app"].isPresent || receipt["bundle_id"].isPresent || receipt["receipt_type"].isPresent
        guard let bundleId = receipt["bundle_id"].string ?? receipt["bid"].string else {
            throw ReceiptVerificationError.malformedResponse("the receipt names no bundle id ('bundle_id' or 'bid')")
        }
        let environment = root["environment"].string.flatMap(StoreEnvironment.init(responseValue:))
            ?? receipt["receipt_type"].string.flatMap(StoreEnvironment.init(responseValue:))
            ?? answeredBy

        var sources: [LenientJSON] = []
        if receipt["transaction_id"].isPresent { sources.append(receipt) }
        sources += Self.entries(receipt["in_app"])
        sources += Self.entries(root["latest_receipt_info"])
        sources += Self.entries(root["latest_expired_receipt_info"])

        var byId: [String: ReceiptTransaction] = [:]
        for source in sources {
            let transaction = try Self.transaction(source)
            if let earlier = byId[transaction.transactionId] {
                byId[transaction.transactionId] = earlier.updated(by: transaction)
            } else {
                byId[transaction.transactionId] = transaction
            }
        }
        let transactions = byId.values.sorted {
            ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId)
        }
        let pending = try Self.entries(root["pending_renewal_info"]).map(Self.pendingRenewal)
        return VerifiedReceipt(
            environment: environment,
            bundleId: bundleId,
            receiptSHA256: receiptSHA256,
            status: status,
            style: isAppReceipt ? .appReceipt : .transactionReceipt,
            transactions: transactions,
            pendingRenewals: pending,
            latestReceipt: root["latest_receipt"].string,
            receiptCreationDate: receipt.date("receipt_creation_date"),
            answeredAt: receipt.date("request_date") ?? Date(),
            answer: answer
        )
    }

    /// An array's elements, or a single object as one entry (old receipts send objects where new ones send arrays).
    static func entries(_ value: LenientJSON) -> [LenientJSON] {
        if let array = value.array { return array.filter { $0.object != nil } }
        if value.object != nil { return [value] }
        return []
    }

    /// The longest product id an answer may name, in UTF-8 bytes: the bound every path that
    /// records App Store facts holds identifiers to (App Store Connect's are far shorter).
    static let longestProductId = AppStoreAnswer.longestIdentifier

    static func transaction(_ entry: LenientJSON) throws -> ReceiptTransaction {
        guard let transactionId = entry["transaction_id"].string else {
            throw ReceiptVerificationError.malformedResponse("a transaction without 'transaction_id'")
        }
        guard let productId = entry["product_id"].string else {
            throw ReceiptVerificationError.malformedResponse("transaction \(transactionId) has no 'product_id'")
        }
        // The log indexes every event's product id, and an index entry has a size limit: an answer
        // naming a product id longer than any App Store Connect allows is refused before anything is kept.
        guard productId.utf8.count <= Self.longestProductId else {
            throw ReceiptVerificationError.malformedResponse(
                "transaction \(transactionId) names a product id of \(productId.utf8.count) bytes; a product id has at most \(Self.longestProductId)"
            )
        }
        guard let purchaseDate = entry.date("purchase_date") else {
            throw ReceiptVerificationError.malformedResponse("transaction \(transactionId) has no readable 'purchase_date'")
        }
        return ReceiptTransaction(
            transactionId: transactionId,
            originalTransactionId: entry["original_transaction_id"].string ?? transactionId,
            productId: productId,
            quantity: entry["quantity"].int ?? 1,
            purchaseDate: purchaseDate,
            originalPurchaseDate: entry.date("original_purchase_date") ?? purchaseDate,
            expiresDate: entry.date("expires_date"),
            cancellationDate: entry.date("cancellation_date"),
            cancellationReason: entry["cancellation_reason"].int,
            isTrialPeriod: entry["is_trial_period"].bool ?? false,
            isInIntroOfferPeriod: entry["is_in_intro_offer_period"].bool ?? false,
            webOrderLineItemId: entry["web_order_line_item_id"].string,
            fields: fieldsText(entry)
        )
    }

    /// Every field of an entry as text: strings as sent, numbers and booleans as written, anything
    /// nested as compact JSON. Nulls are left out.
    static func fieldsText(_ entry: LenientJSON) -> [String: String] {
        var fields: [String: String] = [:]
        for (key, value) in entry.object ?? [:] {
            let json = LenientJSON(value)
            guard json.isPresent else { continue }
            if let text = json.string {
                fields[key] = text
            } else if let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) {
                fields[key] = String(decoding: data, as: UTF8.self)
            }
        }
        return fields
    }

    static func pendingRenewal(_ entry: LenientJSON) throws -> PendingRenewalInfo {
        guard let original = entry["original_transaction_id"].string else {
            throw ReceiptVerificationError.malformedResponse("a pending_renewal_info entry without 'original_transaction_id'")
        }
        return PendingRenewalInfo(
            originalTransactionId: original,
            productId: entry["product_id"].string,
            autoRenewProductId: entry["auto_renew_product_id"].string,
            willAutoRenew: entry["auto_renew_status"].bool,
            expirationIntent: entry["expiration_intent"].int,
            isInBillingRetryPeriod: entry["is_in_billing_retry_period"].bool,
            fields: fieldsText(entry)
        )
    }
}

extension ReceiptTransaction {
    /// This transaction as `newer` reports it, keeping what only this view knew.
    func updated(by newer: ReceiptTransaction) -> ReceiptTransaction {
        ReceiptTransaction(
            transactionId: transactionId,
            originalTransactionId: newer.originalTransactionId,
            productId: newer.productId,
            quantity: newer.quantity,
            purchaseDate: newer.purchaseDate,
            originalPurchaseDate: newer.originalPurchaseDate,
            expiresDate: newer.expiresDate ?? expiresDate,
            cancellationDate: newer.cancellationDate ?? cancellationDate,
            cancellationReason: newer.cancellationReason ?? cancellationReason,
            isTrialPeriod: newer.isTrialPeriod || isTrialPeriod,
            isInIntroOfferPeriod: newer.isInIntroOfferPeriod || isInIntroOfferPeriod,
            webOrderLineItemId: newer.webOrderLineItemId ?? webOrderLineItemId,
            fields: fields.merging(newer.fields) { _, newer in newer }
        )
    }
}
