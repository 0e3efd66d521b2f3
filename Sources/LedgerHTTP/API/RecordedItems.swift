import LedgerApplication
import LedgerDomain

extension LedgerAPI {
    /// A fact a write recorded, as its answer lists it (`RecordedFact`: its kind is the domain's
    /// to say). Absent ids are written as null, so every item has the same keys.
    struct RecordedItem: Encodable, Sendable {
        @NullWhenAbsent var transactionId: String?
        @NullWhenAbsent var productId: String?
        let kind: String
        let position: Int64

        init(_ fact: RecordedFact) {
            transactionId = fact.transactionId
            productId = fact.productId
            kind = fact.kind
            position = fact.position
        }
    }

    /// A transaction the post repeats, and where the log holds it.
    struct DuplicateItem: Encodable, Sendable {
        let transactionId: String
        let position: Int64
    }

    /// A transaction of the receipt this post did not record, and why.
    struct NotRecordedItem: Encodable, Sendable {
        let transactionId: String
        /// held_by_another_user: another user of the app posted it (or its original transaction) first; it stays theirs.
        let reason: String
        let message: String

        static func heldByAnotherUser(_ transactionId: String) -> Self {
            NotRecordedItem(
                transactionId: transactionId, reason: "held_by_another_user",
                message: "another user of the app posted this transaction (or its original transaction) first; it stays theirs and was not recorded for this user"
            )
        }
    }
}
