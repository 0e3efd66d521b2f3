import AppStore
import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import Logging

extension LedgerAPI {
    struct ReceiptBody: Decodable, Sendable {
        let userId: String
        let deviceId: String
        let receiptData: String
        let price: String?
        let currency: String?
    }

    /// `POST /v1/apps/{bundleId}/receipts`: verifies a receipt with the App Store and records what
    /// it said: each transaction the user's stream has not seen, or has seen with other fields, as
    /// a fact, with the post itself. It judges nothing: the answer says what the fold makes of the
    /// facts now.
    ///
    /// Nothing is written before the App Store has answered. The receipt and the answer are kept
    /// first (content-addressed), then the facts are one append: when the App Store is down the
    /// answer is a 503 and the log is untouched, so the same POST later simply succeeds. Posting a
    /// receipt again records nothing new. Transactions another user of the app holds are left
    /// to them and listed in `notRecorded`; a post refused (409 `owned_by_another_user`) records
    /// nothing, and keeps neither the receipt nor the answer unless the refusal came from the append.
    func ingestReceipt(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let (body, _) = try await APIJSON.decode(ReceiptBody.self, from: request, limit: APILimits.receiptBodyBytes, timeout: configuration.bodyReadTimeout)
        try Self.validateIdentifier(body.userId, field: "userId")
        try Self.validateIdentifier(body.deviceId, field: "deviceId")
        try Self.validatePrice(body.price, currency: body.currency)
        guard !body.receiptData.isEmpty, body.receiptData.utf8.count <= APILimits.receiptDataCharacters else {
            throw APIError.invalidRequest("receiptData must be the base64 receipt, 1 to \(APILimits.receiptDataCharacters) characters", field: "receiptData")
        }
        try Self.validateText(body.receiptData, field: "receiptData")
        guard Data(base64Encoded: body.receiptData, options: .ignoreUnknownCharacters) != nil else {
            throw APIError.invalidRequest("receiptData is not base64: send the receipt exactly as StoreKit gives it", field: "receiptData")
        }

        let receipt = try await verify(body.receiptData, app: app, context: context)
        let answer = receipt.appStoreAnswer
        let document = receipt.document(app: app, receiptData: body.receiptData)
        return try await record(answer, document: document, app: app, userId: body.userId, deviceId: body.deviceId,
                                price: body.price, currency: body.currency, context)
    }

    /// Records what an App Store answer (a verified receipt, or a verified StoreKit 2
    /// transaction) says for a user's device (`RecordAppStoreFacts`), and answers what was
    /// recorded, what the stream held already, what another user holds, and the user's
    /// entitlements after it.
    func record(
        _ answer: AppStoreAnswer, document: AppStoreDocument, app: String, userId: String, deviceId: String,
        price: String?, currency: String?, _ context: LedgerRequestContext
    ) async throws -> Response {
        let post = RecordAppStoreFacts.Post(app: app, userId: userId, deviceId: deviceId, price: price, currency: currency,
                                            metadata: Self.metadata(context))
        let recording = try await services.recordFacts(answer, document: document, post: post)
        struct Answer: Encodable {
            let position: Int64
            let environment: String
            let recorded: [RecordedItem]
            let duplicates: [DuplicateItem]
            let notRecorded: [NotRecordedItem]
            let entitlements: EntitlementsBody
        }
        return try APIJSON.response(Answer(
            position: recording.position, environment: answer.environment.rawValue, recorded: recording.recorded.map(RecordedItem.init),
            duplicates: recording.duplicates.map { DuplicateItem(transactionId: $0.transactionId, position: $0.position) },
            notRecorded: recording.notRecorded.map(NotRecordedItem.heldByAnotherUser),
            entitlements: EntitlementsBody(userId: userId, position: recording.position, state: recording.state, catalog: recording.catalog)
        ))
    }

    /// Asks the App Store; its refusals become 422, its absence 503.
    private func verify(_ receiptData: String, app: String, context: LedgerRequestContext) async throws -> VerifiedReceipt {
        let secret: String?
        do {
            secret = try await services.directory.sharedSecret(of: app)
        } catch let error as SecretError {
            // The operator's to fix: the whole story goes to the log, the caller gets a 500 naming the problem.
            context.logger.error("shared secret unreadable", metadata: ["ledger.app": "\(app)", "ledger.error": "\(error.message)"])
            throw error
        }
        // Refusals and outages of the App Store become API errors in APIError+Mapping.swift.
        let receipt = try await services.verifier.verify(
            ReceiptVerificationRequest(receiptData: receiptData, sharedSecret: secret.map(SharedSecret.init)), logger: context.logger
        )
        guard receipt.bundleId == app else {
            throw APIError.unprocessable("receipt_of_another_app", "the receipt belongs to \(receipt.bundleId), not \(app); nothing was recorded")
        }
        return receipt
    }

    static func validatePrice(_ price: String?, currency: String?) throws {
        guard (price == nil) == (currency == nil) else {
            throw APIError.invalidRequest("price and currency go together: send both (from the device's product info) or neither",
                                          field: price == nil ? "price" : "currency")
        }
        if let currency, !Product.isCurrencyCode(currency) {
            throw APIError.invalidRequest("currency '\(currency)' is not an ISO 4217 code such as USD", field: "currency")
        }
        if let price, !Product.isDecimal(price) {
            throw APIError.invalidRequest("price '\(price)' is not a decimal amount such as 0.99 (text, not a number)", field: "price")
        }
    }
}
