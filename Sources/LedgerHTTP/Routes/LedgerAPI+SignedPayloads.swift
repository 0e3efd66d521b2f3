import AppStore
import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import Logging
import Metrics

extension LedgerAPI {
    struct SignedTransactionBody: Decodable, Sendable {
        let userId: String
        let deviceId: String
        let signedTransaction: String
    }

    /// `POST /v1/apps/{bundleId}/transactions`: a StoreKit 2 transaction a device got
    /// (`Transaction.jwsRepresentation`). Verified here (Apple's signature, chain, app and
    /// environment), no call to Apple; then recorded like a receipt's transactions, with Apple's
    /// fields verbatim (its `price` in milliunits and `currency`, `offerType`, `revocationDate`, …).
    /// A refused payload records nothing.
    func ingestSignedTransaction(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let (body, _) = try await APIJSON.decode(SignedTransactionBody.self, from: request, limit: APILimits.signedPayloadBodyBytes,
                                                 timeout: configuration.bodyReadTimeout)
        try Self.validateIdentifier(body.userId, field: "userId")
        try Self.validateIdentifier(body.deviceId, field: "deviceId")
        try Self.validateSignedPayload(body.signedTransaction, field: "signedTransaction")
        let transaction: SignedTransaction
        do {
            transaction = try await configuration.signedPayloads.verify(body.signedTransaction, as: SignedTransaction.self, bundleId: app, environment: nil)
        } catch {
            throw APIError.unprocessable("invalid_signed_transaction", "\(error.description); nothing was recorded").field("signedTransaction")
        }
        let environment = try Self.environment(of: transaction.payloadEnvironment, what: "transaction")
        let document = try Self.document(app: app, jws: body.signedTransaction, decoded: transaction.fields, environment: environment,
                                         signedDate: transaction.signedDate)
        let answer = AppStoreAnswer(
            receiptHash: document.receiptHash, answerHash: document.answerHash, environment: environment, status: 0,
            answeredAt: transaction.signedDate, transactions: [transaction.fields], renewalInfo: []
        )
        return try await record(answer, document: document, app: app, userId: body.userId, deviceId: body.deviceId,
                                price: nil, currency: nil, context)
    }

    struct NotificationBody: Decodable, Sendable {
        let signedPayload: String
    }

    /// What the notifications route answers Apple (and whoever reads the log).
    struct NotificationAnswer: Encodable, Sendable {
        let notificationUUID: String
        let notificationType: String
        @NullWhenAbsent var subtype: String?
        let environment: String
        /// recorded: on the user's stream; waiting: on the app's notifications stream until its
        /// user appears; duplicate: recorded before (Apple's retry), nothing new.
        let outcome: String
        /// The user it was recorded for; nil while it waits.
        @NullWhenAbsent var userId: String?
        let position: Int64
        let recorded: [RecordedItem]
    }

    /// `POST /v1/apps/{bundleId}/notifications`: Apple's App Store Server Notifications V2
    /// webhook. No API key (Apple sends none): the signature is the authentication. Answers 200
    /// only once the notification is in the log, so Apple's retries are safe, and the same
    /// `notificationUUID` again records nothing. The notification goes to the user who holds its
    /// original transaction (or its `appAccountToken`), followed by what it says of the
    /// transaction and the renewal info; with no such user yet it waits on the app's
    /// notifications stream and is copied to the user's stream when the user posts the transaction.
    /// Types the ledger does not act on are recorded all the same.
    func receiveNotification(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let app = try Self.parameter("bundleId", context)
        let (body, _) = try await APIJSON.decode(NotificationBody.self, from: request, limit: APILimits.signedPayloadBodyBytes,
                                                 timeout: configuration.webhookBodyReadTimeout)
        try Self.validateSignedPayload(body.signedPayload, field: "signedPayload")
        let verified: (notification: SignedNotification, transaction: SignedTransaction?, renewalInfo: SignedRenewalInfo?)
        do {
            verified = try await configuration.signedPayloads.verifyNotification(body.signedPayload, bundleId: app)
        } catch {
            // Anyone can reach this route: the answer does not say which check failed (that would
            // guide whoever crafts payloads); the operator's log and metrics do.
            Counter(label: "ledger_webhook_refusals_total", dimensions: [("check", error.check)]).increment()
            refusals.warning("notification refused", metadata: [
                "ledger.app": "\(UntrustedText.quoted(app, limit: 120))", "ledger.check": "\(error.check)",
                "ledger.error": "\(UntrustedText.quoted(error.description, limit: 400))",
            ], to: context.logger)
            throw APIError(.unauthorized, "invalid_signature",
                           "the payload is not one the App Store signed for this app (the server's log says which check failed); nothing was recorded")
        }
        guard let taken = try VerifiedNotification(jws: body.signedPayload, app: app, verified: verified) else {
            _ = try Self.environment(of: verified.notification.payloadEnvironment, what: "notification")
            throw APIError.unprocessable("invalid_environment", "the notification names no environment the ledger records; nothing was recorded")
        }
        let (notification, document) = (taken.notification, taken.document)
        let environment = notification.environment
        let outcome = try await services.notifications(notification, document: document, app: app, metadata: Self.metadata(context))
        return try APIJSON.response(NotificationAnswer(
            notificationUUID: notification.notificationUUID, notificationType: notification.notificationType, subtype: notification.subtype,
            environment: environment.rawValue, outcome: outcome.kind.rawValue, userId: outcome.userId, position: outcome.position,
            recorded: outcome.recorded.map(RecordedItem.init)
        ))
    }

    /// A signed payload's text: compact JWS, within bounds.
    static func validateSignedPayload(_ text: String, field: String) throws {
        guard !text.isEmpty, text.utf8.count <= APILimits.signedPayloadCharacters else {
            throw APIError.invalidRequest("\(field) must be the signed payload (a compact JWS), 1 to \(APILimits.signedPayloadCharacters) characters", field: field)
        }
        guard text.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) })
        else {
            throw APIError.invalidRequest("\(field) is not a compact JWS (three base64url parts joined by dots): send it exactly as StoreKit or Apple gives it", field: field)
        }
    }

    /// The environments the ledger records; Xcode's and local testing's payloads are not Apple's.
    static func environment(of name: String?, what: String) throws -> StoreEnvironment {
        guard let name, let environment = StoreEnvironment(responseValue: name) else {
            throw APIError.unprocessable("invalid_environment",
                                         "the \(what)'s environment is '\(name ?? "none")'; the ledger records Production and Sandbox only; nothing was recorded")
        }
        return environment
    }

    /// The signed payload as posted and what it decoded to, kept like a receipt and its answer.
    static func document(
        app: String, jws: String, decoded: [String: String], environment: StoreEnvironment, signedDate: Date
    ) throws -> AppStoreDocument {
        let json = try LedgerJSON.encode(decoded)
        return AppStoreDocument(
            app: app, receiptHash: AppStoreReceiptVerifier.sha256Hex(jws), receiptData: jws,
            answerHash: AppStoreReceiptVerifier.sha256Hex(json), environment: environment.rawValue, status: 0,
            answeredAt: signedDate, answer: Data(json.utf8)
        )
    }
}

extension APIError {
    /// The same error, naming the request field it is about.
    func field(_ name: String) -> APIError {
        var error = self
        error.field = name
        return error
    }
}
