import Foundation
import LedgerApplication
import LedgerDomain
import NIOHTTP1

/// The App Store Server API's calls besides the transaction history, each within the client's
/// deadline, through the same request (no redirects, Apple's 429 honoured per app), every signed
/// payload verified as a device's would be.
extension AppStoreServerAPI {
    struct HistoryRequest: Encodable {
        let startDate: Int64
        let endDate: Int64
    }

    struct HistoryAnswer: Decodable {
        struct Item: Decodable { let signedPayload: String? }
        let notificationHistory: [Item]?
        let hasMore: Bool?
        let paginationToken: String?
    }

    struct StatusAnswer: Decodable {
        struct Group: Decodable {
            let subscriptionGroupIdentifier: String?
            let lastTransactions: [Last]?
        }

        struct Last: Decodable {
            let status: Int?
            let originalTransactionId: String?
            let signedTransactionInfo: String?
            let signedRenewalInfo: String?
        }

        let data: [Group]?
    }

    struct OrderAnswer: Decodable {
        let status: Int?
        let signedTransactions: [String]?
    }

    struct TestAnswer: Decodable { let testNotificationToken: String? }

    struct TestStatusAnswer: Decodable {
        struct Attempt: Decodable {
            let attemptDate: Double?
            let sendAttemptResult: String?
        }

        let signedPayload: String?
        let sendAttempts: [Attempt]?
    }

    /// One page of Get Notification History (`POST /inApps/v1/notifications/history`), each
    /// notification verified and made into the fact the webhook records.
    public func notificationHistoryPage(
        bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey, from: Date, to: Date, page: String?
    ) async throws(AppStoreServerAPIError) -> NotificationHistoryPage {
        try await withDeadline("the notification history's page") { () async throws(AppStoreServerAPIError) -> NotificationHistoryPage in
            var path = "/inApps/v1/notifications/history"
            if let page { path += "?paginationToken=" + (page.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? page) }
            // The same body on every page of one walk, as Apple asks.
            let body = try Self.json(HistoryRequest(startDate: from.milliseconds, endDate: to.milliseconds))
            let data = try await send(.POST, path, bundleId: bundleId, environment: environment, key: key, json: body,
                                      notFound: { _ in .notFound("the App Store knows no notification history of \(bundleId) in \(environment.rawValue)") })
            let answer: HistoryAnswer
            do { answer = try JSONDecoder().decode(HistoryAnswer.self, from: data) } catch { throw .malformed("not a notification history: \(error)") }
            var items: [NotificationHistoryPage.Item] = []
            var refused: [String] = []
            for jws in (answer.notificationHistory ?? []).compactMap(\.signedPayload) {
                do {
                    let verified = try await verifier.verifyNotification(jws, bundleId: bundleId, environment: environment)
                    guard let taken = try VerifiedNotification(jws: jws, app: bundleId, verified: verified) else {
                        refused.append("a notification names an environment the ledger does not record")
                        continue
                    }
                    items.append(.init(notification: taken.notification, document: taken.document))
                } catch let error as SignedPayloadError {
                    refused.append(error.description)
                } catch {
                    refused.append("\(error)")
                }
            }
            return NotificationHistoryPage(items: items, refused: refused, hasMore: answer.hasMore == true, nextPage: answer.paginationToken)
        }
    }

    /// Get All Subscription Statuses (`GET /inApps/v1/subscriptions/{transactionId}`).
    public func subscriptionStatuses(
        of transactionId: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey
    ) async throws(AppStoreServerAPIError) -> [SubscriptionStatus] {
        try Self.checkIdentifier(transactionId, "transaction id")
        return try await withDeadline("the subscription statuses") { () async throws(AppStoreServerAPIError) -> [SubscriptionStatus] in
            let data = try await send(.GET, "/inApps/v1/subscriptions/\(transactionId)", bundleId: bundleId, environment: environment, key: key,
                                      notFound: { _ in .transactionNotFound(transactionId) })
            let answer: StatusAnswer
            do { answer = try JSONDecoder().decode(StatusAnswer.self, from: data) } catch { throw .malformed("not subscription statuses: \(error)") }
            var statuses: [SubscriptionStatus] = []
            for group in answer.data ?? [] {
                for last in group.lastTransactions ?? [] {
                    guard let original = last.originalTransactionId else { continue }
                    var transaction: HistoryTransaction?
                    var renewalInfo: [String: String]?
                    do throws(SignedPayloadError) {
                        if let jws = last.signedTransactionInfo {
                            let signed = try await verifier.verify(jws, as: SignedTransaction.self, bundleId: bundleId, environment: environment)
                            transaction = HistoryTransaction(fields: signed.fields, signedDate: signed.signedDate)
                        }
                        if let jws = last.signedRenewalInfo {
                            renewalInfo = try await verifier.verify(jws, as: SignedRenewalInfo.self, bundleId: nil, environment: environment).fields
                        }
                    } catch {
                        throw .malformed("a subscription's signed payload did not verify: \(error.description)")
                    }
                    statuses.append(SubscriptionStatus(status: last.status ?? 0, group: group.subscriptionGroupIdentifier ?? "", originalTransactionId: original,
                                                       transaction: transaction, renewalInfo: renewalInfo))
                }
            }
            return statuses
        }
    }

    /// Send Consumption Information (`PUT /inApps/v2/transactions/consumption/{transactionId}`); Apple answers 202.
    public func sendConsumption(
        _ information: ConsumptionInformation, transactionId: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey
    ) async throws(AppStoreServerAPIError) {
        try Self.checkIdentifier(transactionId, "transaction id")
        let body = try Self.json(information)
        _ = try await withDeadline("the consumption information") { () async throws(AppStoreServerAPIError) -> Data in
            try await send(.PUT, "/inApps/v2/transactions/consumption/\(transactionId)", bundleId: bundleId, environment: environment, key: key,
                           json: body, notFound: { _ in .transactionNotFound(transactionId) })
        }
    }

    /// Look Up Order ID (`GET /inApps/v1/lookup/{orderId}`, production only): the order's
    /// transactions of the app, verified; nil when Apple knows no such order with one.
    public func lookUpOrder(_ orderId: String, bundleId: String, key: AppStoreServerAPIKey) async throws(AppStoreServerAPIError) -> [SignedTransaction]? {
        try Self.checkIdentifier(orderId, "order id")
        return try await withDeadline("the order lookup") { () async throws(AppStoreServerAPIError) -> [SignedTransaction]? in
            let data = try await send(.GET, "/inApps/v1/lookup/\(orderId)", bundleId: bundleId, environment: .production, key: key,
                                      notFound: { _ in .notFound("the App Store knows no order \(orderId)") })
            let answer: OrderAnswer
            do { answer = try JSONDecoder().decode(OrderAnswer.self, from: data) } catch { throw .malformed("not an order lookup: \(error)") }
            guard answer.status == 0 else { return nil }
            var transactions: [SignedTransaction] = []
            for jws in answer.signedTransactions ?? [] {
                do throws(SignedPayloadError) {
                    transactions.append(try await verifier.verify(jws, as: SignedTransaction.self, bundleId: bundleId, environment: .production))
                } catch {
                    throw .malformed("a transaction of the order did not verify: \(error.description)")
                }
            }
            return transactions
        }
    }

    /// Request a Test Notification (`POST /inApps/v1/notifications/test`); answers Apple's token for it.
    public func requestTestNotification(bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey) async throws(AppStoreServerAPIError) -> String {
        try await withDeadline("the test notification") { () async throws(AppStoreServerAPIError) -> String in
            let data = try await send(.POST, "/inApps/v1/notifications/test", bundleId: bundleId, environment: environment, key: key,
                                      notFound: { _ in .notFound("the App Store has no notification URL for \(bundleId) in \(environment.rawValue): set it in App Store Connect (App Information > App Store Server Notifications)") })
            guard let token = (try? JSONDecoder().decode(TestAnswer.self, from: data))?.testNotificationToken else {
                throw .malformed("no testNotificationToken in \(String(decoding: data.prefix(200), as: UTF8.self))")
            }
            return token
        }
    }

    /// Get Test Notification Status (`GET /inApps/v1/notifications/test/{token}`); nil while Apple
    /// has not tried to send it yet (its 404).
    public func testNotificationStatus(
        token: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey
    ) async throws(AppStoreServerAPIError) -> TestNotificationStatus? {
        try Self.checkIdentifier(token, "test notification token")
        return try await withDeadline("the test notification's status") { () async throws(AppStoreServerAPIError) -> TestNotificationStatus? in
            let data: Data
            do throws(AppStoreServerAPIError) {
                data = try await send(.GET, "/inApps/v1/notifications/test/\(token)", bundleId: bundleId, environment: environment, key: key,
                                      notFound: { _ in .notFound("not tried yet") })
            } catch .notFound {
                return nil
            }
            let answer: TestStatusAnswer
            do { answer = try JSONDecoder().decode(TestStatusAnswer.self, from: data) } catch { throw .malformed("not a test notification status: \(error)") }
            guard let jws = answer.signedPayload else { return nil }
            let uuid: String
            do throws(SignedPayloadError) {
                uuid = try await verifier.verify(jws, as: SignedNotification.self, bundleId: bundleId, environment: environment).notificationUUID
            } catch {
                throw .malformed("the test notification did not verify: \(error.description)")
            }
            return TestNotificationStatus(notificationUUID: uuid, attempts: (answer.sendAttempts ?? []).map {
                .init(date: Date(timeIntervalSince1970: ($0.attemptDate ?? 0) / 1_000), result: $0.sendAttemptResult ?? "OTHER")
            })
        }
    }

    static func json(_ value: some Encodable) throws(AppStoreServerAPIError) -> Data {
        do { return try JSONEncoder().encode(value) } catch { throw .malformed("cannot encode the request: \(error)") }
    }
}

/// The calls as the use cases ask for them: the app's stored key parsed, the errors in the use
/// cases' terms.
extension AppStoreServerAPI: AppStoreServer {
    func parsed(_ key: ServerAPIKey, app: String) throws -> AppStoreServerAPIKey {
        do {
            return try AppStoreServerAPIKey(keyID: key.keyID, issuerID: key.issuerID, privateKeyPEM: key.privateKeyPEM)
        } catch {
            throw TransactionHistoryError.failed("the stored App Store Server API key of \(app) cannot be used: \(error.description)")
        }
    }

    static func mapped(_ error: AppStoreServerAPIError) -> TransactionHistoryError {
        switch error {
        case .transactionNotFound(let id): .transactionNotFound(id)
        case .notFound(let what): .notFound(what)
        case .rateLimited(let until): .rateLimited(until: until, error.description)
        case .refused: .refused(error.description)
        default: .failed(error.description)
        }
    }

    public func notificationHistory(
        app: String, environment: StoreEnvironment, key: ServerAPIKey, from: Date, to: Date, page: String?
    ) async throws -> NotificationHistoryPage {
        let key = try parsed(key, app: app)
        do { return try await notificationHistoryPage(bundleId: app, environment: environment, key: key, from: from, to: to, page: page) }
        catch { throw Self.mapped(error) }
    }

    public func subscriptionStatuses(app: String, environment: StoreEnvironment, key: ServerAPIKey, transactionId: String) async throws -> [SubscriptionStatus] {
        let key = try parsed(key, app: app)
        do { return try await subscriptionStatuses(of: transactionId, bundleId: app, environment: environment, key: key) }
        catch { throw Self.mapped(error) }
    }

    public func sendConsumption(
        app: String, environment: StoreEnvironment, key: ServerAPIKey, transactionId: String, information: ConsumptionInformation
    ) async throws {
        let key = try parsed(key, app: app)
        do { try await sendConsumption(information, transactionId: transactionId, bundleId: app, environment: environment, key: key) }
        catch { throw Self.mapped(error) }
    }

    public func lookUpOrder(app: String, key: ServerAPIKey, orderId: String) async throws -> [HistoryTransaction]? {
        let key = try parsed(key, app: app)
        do { return try await lookUpOrder(orderId, bundleId: app, key: key)?.map { HistoryTransaction(fields: $0.fields, signedDate: $0.signedDate) } }
        catch { throw Self.mapped(error) }
    }

    public func requestTestNotification(app: String, environment: StoreEnvironment, key: ServerAPIKey) async throws -> String {
        let key = try parsed(key, app: app)
        do { return try await requestTestNotification(bundleId: app, environment: environment, key: key) }
        catch { throw Self.mapped(error) }
    }

    public func testNotificationStatus(app: String, environment: StoreEnvironment, key: ServerAPIKey, token: String) async throws -> TestNotificationStatus? {
        let key = try parsed(key, app: app)
        do { return try await testNotificationStatus(token: token, bundleId: app, environment: environment, key: key) }
        catch { throw Self.mapped(error) }
    }
}
