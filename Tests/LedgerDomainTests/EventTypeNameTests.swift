import Foundation
@testable import LedgerDomain
import Testing

@Suite("Event type names carry their schema version")
struct EventTypeNameTests {
    @Test("a stored name round-trips")
    func roundTrip() throws {
        let name = try EventTypeName(stored: "PurchaseRecorded.v1")
        #expect(name.name == "PurchaseRecorded")
        #expect(name.version == 1)
        #expect(name.stored == "PurchaseRecorded.v1")
        #expect(try EventTypeName("SubscriptionRenewed", version: 12).stored == "SubscriptionRenewed.v12")
    }

    @Test("names without a version, with a bad version or odd characters are refused", arguments: [
        "PurchaseRecorded", "PurchaseRecorded.v0", "PurchaseRecorded.vx", ".v1", "Purchase Recorded.v1", "1Purchase.v1",
        "Purchase-Recorded.v1", "PurchaseRecorded.1",
    ])
    func refused(_ stored: String) {
        #expect(throws: LedgerInputError.self) { try EventTypeName(stored: stored) }
    }
}

@Suite("Stream ids")
struct StreamIDTests {
    @Test("a user's stream is named by app and user")
    func userStream() throws {
        #expect(try StreamID.user(app: "com.example.app", user: "42").rawValue == "user/com.example.app/42")
    }

    @Test("empty, spaced, control-character and overlong ids are refused", arguments: [
        "", "has space", "tab\there", "new\nline", String(repeating: "x", count: 513),
    ])
    func refused(_ raw: String) {
        #expect(throws: LedgerInputError.self) { try StreamID(raw) }
    }
}

@Suite("Deduplication keys")
struct DeduplicationKeyTests {
    @Test("an App Store transaction's key names app, environment, kind and transaction")
    func appStoreKey() throws {
        let key = try DeduplicationKey.appStoreTransaction(
            app: "com.example.app", environment: .production, kind: .payment, transactionID: "1000000012345"
        )
        #expect(key.rawValue == "appstore/com.example.app/production/payment/1000000012345")
    }

    @Test("the same transaction in another environment or kind is another key")
    func distinctKeys() throws {
        let production = try DeduplicationKey.appStoreTransaction(app: "a", environment: .production, kind: .payment, transactionID: "1")
        let sandbox = try DeduplicationKey.appStoreTransaction(app: "a", environment: .sandbox, kind: .payment, transactionID: "1")
        let restore = try DeduplicationKey.appStoreTransaction(app: "a", environment: .production, kind: .restore, transactionID: "1")
        #expect(Set([production, sandbox, restore]).count == 3)
    }

    @Test("parts that are empty or contain '/' are refused, so keys cannot collide")
    func ambiguousParts() {
        #expect(throws: LedgerInputError.self) {
            try DeduplicationKey.appStoreTransaction(app: "a/b", environment: .production, kind: .payment, transactionID: "1")
        }
        #expect(throws: LedgerInputError.self) {
            try DeduplicationKey.appStoreTransaction(app: "a", environment: .production, kind: .payment, transactionID: "")
        }
        #expect(throws: LedgerInputError.self) { try DeduplicationKey(rawValue: "line\nbreak") }
    }
}

@Suite("New events")
struct NewEventTests {
    @Test("data and metadata must be JSON objects")
    func jsonObjects() throws {
        let type = try EventTypeName("ItemConsumed", version: 1)
        #expect(throws: LedgerInputError.self) { try NewEvent(type: type, data: "not json") }
        #expect(throws: LedgerInputError.self) { try NewEvent(type: type, data: "[1, 2]") }
        #expect(throws: LedgerInputError.self) { try NewEvent(type: type, data: "{}", metadata: "42") }
        #expect(try NewEvent(type: type, data: #"{"quantity": 2}"#).data == #"{"quantity": 2}"#)
    }

    @Test("an encoded payload has stable, sorted keys")
    func encodedPayload() throws {
        struct Consumed: Encodable {
            let quantity: Int
            let productId: String
            let deviceId: String
        }
        let event = try NewEvent(
            type: EventTypeName("ItemConsumed", version: 1),
            payload: Consumed(quantity: 2, productId: "coins/100", deviceId: "d1")
        )
        #expect(event.data == #"{"deviceId":"d1","productId":"coins/100","quantity":2}"#)
        #expect(event.metadata == "{}")
    }
}

@Suite("Append results")
struct AppendResultTests {
    @Test("the position of an append is the highest it reached, duplicates included")
    func position() {
        let stored = AppendResult.EventReference(eventID: .init(), position: 90, streamID: "s", streamVersion: 3)
        let mixed = AppendResult(streamID: "s", outcomes: [.duplicate(of: stored), .appended(position: 120, streamVersion: 4)])
        #expect(mixed.position == 120)
        #expect(!mixed.isDuplicate)
        #expect(mixed.appendedCount == 1)
        let allDuplicates = AppendResult(streamID: "s", outcomes: [.duplicate(of: stored)])
        #expect(allDuplicates.position == 90)
        #expect(allDuplicates.isDuplicate)
    }
}
