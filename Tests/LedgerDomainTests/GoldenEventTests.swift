import Foundation
@testable import LedgerDomain
import Testing

/// One sample of every event type, and the JSON it is stored as.
struct GoldenSample: Sendable, CustomStringConvertible {
    let typeName: EventTypeName
    let encode: @Sendable () throws -> String
    let roundTrips: @Sendable (String) throws -> Bool

    init<Event: LedgerEvent>(_ event: Event) {
        typeName = Event.typeName
        encode = { try LedgerJSON.encode(event) }
        roundTrips = { try LedgerJSON.decode(Event.self, from: $0) == event }
    }

    var description: String { typeName.stored }

    static let all: [GoldenSample] = {
        let purchased = utc("2013-01-01T00:00:00.000Z")
        return [
            GoldenSample(ProductDefined(product: try! Product(
                productId: "com.example.app.gold.month", type: .nonRenewing, duration: try! ISODuration(parsing: "P1M"),
                subscriptionGroup: "gold", referenceName: "Gold, one month", prices: ["EUR": "4.49", "USD": "4.99"]
            ))),
            GoldenSample(DeviceRegistered(deviceId: "9A1F-device")),
            GoldenSample(PurchaseRecorded(
                transactionId: "1000000012345678", originalTransactionId: "1000000012345678",
                productId: "com.example.app.coins.100", productType: .consumable, quantity: 2, purchaseDate: purchased,
                environment: .production, deviceId: "9A1F-device", price: "0.99", currency: "USD",
                receiptHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            )),
            GoldenSample(SubscriptionRenewed(
                transactionId: "1000000012349999", originalTransactionId: "1000000012345000",
                productId: "com.example.app.pro.monthly", purchaseDate: purchased,
                expiresDate: utc("2013-02-01T00:00:00.000Z"), environment: .sandbox,
                receiptHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            )),
            GoldenSample(PurchaseRestored(
                transactionId: "1000000012350000", originalTransactionId: "1000000012345678",
                productId: "com.example.app.levels", deviceId: "second-device", purchaseDate: purchased,
                environment: .production, receiptHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            )),
            GoldenSample(TransactionFinished(transactionId: "1000000012345678", deviceId: "9A1F-device")),
            GoldenSample(PurchaseFailed(productId: "com.example.app.coins.100", deviceId: "9A1F-device", errorCode: "SKErrorPaymentCancelled", cancelled: true)),
            GoldenSample(PurchaseRevoked(transactionId: "1000000012345678", revokedAt: utc("2013-01-05T16:30:00.250Z"), reason: "refunded by Apple (cancellation_date)")),
            GoldenSample(ItemConsumed(productId: "com.example.app.coins.100", quantity: 1, deviceId: "9A1F-device")),
            GoldenSample(SubscriptionRestoredToDevice(deviceId: "second-device", transactionIds: ["1000000012345700", "1000000012345800"])),
            GoldenSample(SubscriptionExpiryReported(transactionId: "1000000012345800", reportedAt: utc("2013-01-20T08:00:00.000Z"), status: 21006)),
            GoldenSample(ReceiptPosted(
                receiptHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                answerHash: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", deviceId: "9A1F-device",
                environment: .production, status: 0, answeredAt: utc("2013-01-01T00:00:05.000Z"), price: "0.99", currency: "USD",
                transactionIds: ["1000000012345678"]
            )),
            GoldenSample(AppStoreTransactionObserved(
                transactionId: "1000000012345678", environment: .production,
                fields: ["transaction_id": "1000000012345678", "original_transaction_id": "1000000012345678",
                         "product_id": "com.example.app.coins.100", "quantity": "2", "purchase_date_ms": "1356998400000",
                         "in_app_ownership_type": "PURCHASED"],
                receiptHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", deviceId: "9A1F-device",
                answeredAt: utc("2013-01-01T00:00:05.000Z"), status: 0
            )),
            GoldenSample(RenewalInfoObserved(
                originalTransactionId: "1000000012345000", environment: .sandbox,
                fields: ["original_transaction_id": "1000000012345000", "auto_renew_status": "0", "expiration_intent": "1",
                         "auto_renew_product_id": "com.example.app.pro.monthly"],
                receiptHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", answeredAt: utc("2013-01-20T08:00:00.000Z")
            )),
            GoldenSample(AppStoreNotificationReceived(
                notificationUUID: "002e14d5-51f5-4503-b5a8-c3a1af68eb20", notificationType: "REFUND", subtype: nil, environment: .production,
                signedDate: utc("2013-01-05T16:30:00.250Z"),
                fields: ["version": "2.0", "data.appAppleId": "1234567890", "data.bundleId": "com.example.app", "data.bundleVersion": "1.2",
                         "data.environment": "Production"],
                transaction: ["transactionId": "1000000012345678", "originalTransactionId": "1000000012345678",
                              "productId": "com.example.app.coins.100", "type": "Consumable", "quantity": "2", "price": "990", "currency": "USD",
                              "purchaseDate": "1356998400000", "revocationDate": "1357403400250", "revocationReason": "0",
                              "inAppOwnershipType": "PURCHASED", "bundleId": "com.example.app", "environment": "Production",
                              "signedDate": "1357403400250"],
                renewalInfo: nil, payloadHash: "3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7"
            )),
            GoldenSample(SalesReportReceived(
                reportDate: "2013-01-05", contentHash: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752",
                source: "file:S_D_85000000_20130105.txt.gz", vendorNumber: "85000000",
                columns: ["Provider", "SKU", "Title", "Product Type Identifier", "Units", "Developer Proceeds", "Begin Date", "End Date",
                          "Customer Currency", "Country Code", "Currency of Proceeds", "Apple Identifier", "Customer Price", "Subscription", "Period"],
                lines: [
                    SalesReportLine(sku: "com.example.app.coins.100", title: "100 coins", productTypeIdentifier: "IA1", units: "-2",
                                    developerProceeds: "0.70", customerPrice: "-0.99", customerCurrency: "USD", proceedsCurrency: "USD",
                                    countryCode: "US", beginDate: "2013-01-05", endDate: "2013-01-05", appleIdentifier: "1234567890"),
                    SalesReportLine(sku: "com.example.app.pro.monthly", title: "Pro", productTypeIdentifier: "IAY", units: "1",
                                    developerProceeds: "3.83", customerPrice: "5.49", customerCurrency: "EUR", proceedsCurrency: "EUR",
                                    countryCode: "FR", beginDate: "2013-01-05", endDate: "2013-01-05", appleIdentifier: "1234567891",
                                    parentIdentifier: "APP1", subscription: "Renewal", period: "1 Month", proceedsReason: "Rate After One Year"),
                ],
                otherLines: 3, supersedes: nil
            )),
            GoldenSample(PeriodClosed(
                period: "2013-01", timeZone: "UTC", from: utc("2013-01-01T00:00:00.000Z"), to: utc("2013-02-01T00:00:00.000Z"),
                closeId: UUID(uuidString: "6F1C2E9A-3B4D-4E5F-8A6B-7C8D9E0F1A2B")!, position: 4821, auditTrailVersion: 4, rows: 3,
                rowsChecksum: "1729382256910270464",
                figures: [PeriodClosed.Figure(
                    environment: .production, currency: "USD", productId: "com.example.app.coins.100", purchases: 2, units: 3, gross: "2.97",
                    refunds: 1, refundedUnits: 1, refundedAmount: "0.99", net: "1.98", unpriced: 0, proceeds: "2.07", refundedProceeds: "0.69",
                    netProceeds: "1.38", proceedsCurrency: "USD", proceedsSource: "apple_report", proceedsUnknown: 0
                )],
                closedBy: "cli:finance", publicKey: "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n",
                signature: "c2lnbmF0dXJl"
            )),
            GoldenSample(PeriodReopened(period: "2013-01", closeId: UUID(uuidString: "6F1C2E9A-3B4D-4E5F-8A6B-7C8D9E0F1A2B")!,
                                        reason: "a refund dated in January arrived late", reopenedBy: "key:ab12cd34")),
        ]
    }()
}

@Suite("Stored event JSON is pinned by golden files")
struct GoldenEventTests {
    static func golden(_ name: String) throws -> String {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Golden"),
                               "missing golden file Golden/\(name).json")
        return try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("each event type encodes to exactly its golden JSON and decodes back", arguments: GoldenSample.all)
    func golden(_ sample: GoldenSample) throws {
        let stored = try Self.golden(sample.typeName.stored)
        #expect(try sample.encode() == stored, "changing stored JSON needs a new event version, not an edit")
        #expect(try sample.roundTrips(stored))
    }

    @Test("every user event type decodes through UserEvent by its stored name")
    func userEventDecoding() throws {
        for sample in GoldenSample.all where !["ProductDefined", "SalesReportReceived", "PeriodClosed", "PeriodReopened"].contains(sample.typeName.name) {
            #expect(throws: Never.self) { try UserEvent(type: sample.typeName.stored, data: try sample.encode()) }
        }
        #expect(throws: UnknownEventType.self) { try UserEvent(type: "PurchaseRecorded.v9", data: "{}") }
    }

    @Test("timestamps are UTC with milliseconds")
    func timestamps() {
        #expect(LedgerJSON.formatTimestamp(Date(timeIntervalSince1970: 1_356_998_400.123_4)) == "2013-01-01T00:00:00.123Z")
        #expect(LedgerJSON.parseTimestamp("2013-01-01T00:00:00Z") == Date(timeIntervalSince1970: 1_356_998_400))
    }
}

@Suite("Reading stored timestamps")
struct TimestampParsingTests {
    @Test("the fast path agrees with Foundation's parser, across leap days, month ends and eras", arguments: [
        "1970-01-01T00:00:00.000Z", "2013-01-01T00:00:00.123Z", "2024-02-29T23:59:59.999Z", "2000-03-01T12:30:45.500Z",
        "1969-12-31T23:59:59.001Z", "2100-02-28T00:00:00.000Z", "2038-01-19T03:14:08.000Z",
    ])
    func agrees(_ text: String) throws {
        let fast = try #require(LedgerJSON.parseTimestamp(text))
        let foundation = try Date(text, strategy: .iso8601.year().month().day().dateTimeSeparator(.standard).time(includingFractionalSeconds: true))
        #expect(abs(fast.timeIntervalSince(foundation)) < 0.000_5)
        #expect(LedgerJSON.formatTimestamp(fast) == text)
    }

    @Test("malformed stored timestamps are not read as something else", arguments: [
        "2024-13-01T00:00:00.000Z", "2024-02-30T00:00:00.000Z", "2024-02-29 00:00:00.000Z", "2024-02-2900:00:00.000Z", "yesterday",
    ])
    func malformed(_ text: String) {
        #expect(LedgerJSON.parseTimestamp(text) == nil)
    }
}
