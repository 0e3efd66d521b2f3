import AppStore
import Foundation
import Hummingbird
import LedgerDomain

/// The App Store Server API's other calls, as Apple serves them for the simulator's environment:
/// Get Notification History, Get All Subscription Statuses, Send Consumption Information (V2),
/// Look Up Order ID, Request a Test Notification and its status; each behind the same bearer
/// token as the transaction history, answering Apple's shapes and errors (401 for a bad token, 404
/// with Apple's error code for an unknown id, 429 with `Retry-After` when the fault says so). And
/// the admin routes that make a gap: drop the app's deliveries, add synthetic notifications, list
/// the consumption information received.
extension AppStoreSimulator {
    struct HistoryRequestBody: Decodable {
        let startDate: Double?
        let endDate: Double?
        let notificationType: String?
        let transactionId: String?
        let onlyFailures: Bool?
    }

    struct HistoryItem: Encodable { let signedPayload: String; let sendAttempts: [SimulatorNotifier.SendAttempt] }
    struct HistoryPageView: Encodable { let notificationHistory: [HistoryItem]; let hasMore: Bool; let paginationToken: String? }
    struct StatusItem: Encodable { let status: Int; let originalTransactionId: String; let signedTransactionInfo: String; let signedRenewalInfo: String }
    struct StatusGroup: Encodable { let subscriptionGroupIdentifier: String; let lastTransactions: [StatusItem] }
    struct StatusView: Encodable { let environment: String; let bundleId: String; let appAppleId: Int64; let data: [StatusGroup] }
    struct DroppedBody: Decodable { let dropped: Bool }
    struct SyntheticBody: Decodable { let count: Int; let productId: String? }

    /// Notifications per history page, as Apple sends.
    static let notificationPageSize = 20

    static func appleError(_ code: Int, _ message: String, status: HTTPResponse.Status) throws -> Response {
        try json(["errorCode": AnyEncodable(code), "errorMessage": AnyEncodable(message)], status: status)
    }

    func addServerAPICallRoutes(to router: Router<some RequestContext>) {
        let store = self.store
        let signedPayloads = self.signedPayloads
        let notifier = self.notifier
        let environment = configuration.environment

        router.put("admin/apps/:bundleId/notifications/dropped") { request, context -> Response in
            let bundleId = try context.parameters.require("bundleId")
            guard let body = try await Self.decode(DroppedBody.self, request, context) else { throw SimulatorError.badRequest("send {\"dropped\": true}") }
            await notifier.setDropped(bundleId, body.dropped)
            return try Self.json(["bundleId": AnyEncodable(bundleId), "dropped": AnyEncodable(body.dropped)])
        }
        router.post("admin/apps/:bundleId/notifications/synthetic") { request, context -> Response in
            let bundleId = try context.parameters.require("bundleId")
            guard let body = try await Self.decode(SyntheticBody.self, request, context), (1...1_000_000).contains(body.count) else {
                throw SimulatorError.badRequest("send {\"count\": 1000, \"productId\"?} (1 to 1000000)")
            }
            guard let url = try await store.app(bundleId).notificationURL else {
                throw SimulatorError.conflict("\(bundleId) has no notification URL: PUT /admin/apps/\(bundleId) with {\"notificationURL\"} first")
            }
            let made = try await notifier.enqueueSynthetic(count: body.count, bundleId: bundleId, url: url, productId: body.productId ?? "coins",
                                                           at: await store.now)
            return try Self.json(["queued": AnyEncodable(made)], status: .accepted)
        }
        router.get("admin/consumption") { _, _ -> Response in
            try Self.json(["consumption": await store.consumptionSent])
        }

        for (prefix, asked) in [("", environment), ("production/", .production), ("sandbox/", .sandbox)] as [(String, StoreEnvironment)] {
            /// The app of a valid token, or the answer refusing the call (401, 429, or 404 for the
            /// other environment, which knows nothing of this simulator's).
            @Sendable func authorized(_ request: Request) async throws -> (String?, Response?) {
                guard let bundleId = await Self.authenticate(request, store: store) else { return (nil, Response(status: .unauthorized)) }
                if await store.takeTooManyRequests() {
                    var response = try Self.appleError(4_290_000, "Rate limit exceeded.", status: .tooManyRequests)
                    response.headers[.retryAfter] = String(Date().addingTimeInterval(1).milliseconds)
                    return (nil, response)
                }
                return (bundleId, nil)
            }

            router.post(RouterPath(prefix + "inApps/v1/notifications/history")) { request, context -> Response in
                let (app, refusal) = try await authorized(request)
                guard let bundleId = app else { return refusal! }
                let raw = try await request.body.collect(upTo: 1 << 16)
                guard let body = try? JSONDecoder().decode(HistoryRequestBody.self, from: Data(raw.readableBytesView)),
                      let start = body.startDate, let end = body.endDate
                else { return try Self.appleError(4_000_015, "Invalid request. The start date is not a timestamp value in milliseconds.", status: .badRequest) }
                guard start < end else { return try Self.appleError(4_000_013, "Invalid request. The start date is earlier than the end date.", status: .badRequest) }
                if body.notificationType != nil && body.transactionId != nil {
                    return try Self.appleError(4_000_019, "Invalid request. Supply either a transaction id or a notification type, but not both.", status: .badRequest)
                }
                let now = Date()
                let retention: TimeInterval = (asked == .production ? 180 : 30) * 86_400
                guard start >= (now.timeIntervalSince1970 - retention) * 1_000 else {
                    return try Self.appleError(4_000_012, "Invalid request. The start date is earlier than the allowed start date.", status: .badRequest)
                }
                guard asked == environment else {
                    return try Self.json(HistoryPageView(notificationHistory: [], hasMore: false, paginationToken: nil))
                }
                var records = await notifier.history(bundleId: bundleId, from: Date(timeIntervalSince1970: start / 1_000),
                                                     to: Date(timeIntervalSince1970: min(end, now.milliseconds.double) / 1_000))
                if let type = body.notificationType { records = records.filter { $0.notificationType == type } }
                if let transactionId = body.transactionId { records = records.filter { $0.transactionId == transactionId || $0.originalTransactionId == transactionId } }
                if body.onlyFailures == true { records = records.filter { !$0.delivered } }
                // The token names the page and the request it belongs to: another body with it is refused.
                let fingerprint = String(SimulatorResponseRenderer.stableNumber("\(start)-\(end)-\(body.notificationType ?? "")-\(body.transactionId ?? "")") % 1_000_000)
                var offset = 0
                if let token = request.uri.queryParameters.get("paginationToken") {
                    let parts = token.split(separator: ".")
                    guard parts.count == 2, parts[1] == fingerprint, let value = Int(parts[0]) else {
                        return try Self.appleError(4_000_014, "Invalid request. The pagination token is invalid.", status: .badRequest)
                    }
                    offset = value
                }
                let page = records.dropFirst(offset).prefix(Self.notificationPageSize)
                let next = offset + page.count
                let hasMore = next < records.count
                return try Self.json(HistoryPageView(
                    notificationHistory: page.map { HistoryItem(signedPayload: $0.signedPayload, sendAttempts: $0.sendAttempts) },
                    hasMore: hasMore, paginationToken: hasMore ? "\(next).\(fingerprint)" : nil
                ))
            }

            router.get(RouterPath(prefix + "inApps/v1/subscriptions/:transactionId")) { request, context -> Response in
                let (app, refusal) = try await authorized(request)
                guard let bundleId = app else { return refusal! }
                let transactionId = try context.parameters.require("transactionId")
                guard asked == environment, let statuses = await store.statuses(of: transactionId, bundleId: bundleId) else {
                    return try Self.appleError(4_040_010, "Transaction id not found.", status: .notFound)
                }
                var groups: [String: [StatusItem]] = [:]
                for (group, status, view) in statuses {
                    let product = await store.product(bundleId: bundleId, productId: view.latest.productId)
                    let transaction = try signedPayloads.sign(signedPayloads.fields(of: view.latest, product: product, environment: environment, signedDate: Date()))
                    let renewal = try signedPayloads.sign(signedPayloads.renewalFields(of: view.latest, subscription: view, environment: environment,
                                                                                       signedDate: Date()))
                    groups[group, default: []].append(StatusItem(status: status, originalTransactionId: view.originalTransactionId,
                                                                 signedTransactionInfo: transaction, signedRenewalInfo: renewal))
                }
                return try Self.json(StatusView(
                    environment: environment.responseValue, bundleId: bundleId,
                    appAppleId: Int64(SimulatorResponseRenderer.stableNumber(bundleId) % 10_000_000_000),
                    data: groups.keys.sorted().map { StatusGroup(subscriptionGroupIdentifier: $0, lastTransactions: groups[$0]!) }
                ))
            }

            router.put(RouterPath(prefix + "inApps/v2/transactions/consumption/:transactionId")) { request, context -> Response in
                let (app, refusal) = try await authorized(request)
                guard app != nil else { return refusal! }
                let transactionId = try context.parameters.require("transactionId")
                let raw = try await request.body.collect(upTo: 1 << 16)
                guard let body = (try? JSONSerialization.jsonObject(with: Data(raw.readableBytesView))) as? [String: Any] else {
                    return Response(status: .badRequest)
                }
                guard asked == environment, let transaction = await store.transaction(transactionId) else {
                    return try Self.appleError(4_040_010, "Transaction id not found.", status: .notFound)
                }
                if let refusal = try Self.checkConsumption(body, productType: transaction.productType,
                                                           familyShared: transaction.ownership == .familyShared) { return refusal }
                _ = try await store.recordConsumption(transactionId: transactionId, body: body, at: Date())
                return Response(status: .accepted)
            }

            router.get(RouterPath(prefix + "inApps/v1/lookup/:orderId")) { request, context -> Response in
                let (app, refusal) = try await authorized(request)
                guard let bundleId = app else { return refusal! }
                let orderId = try context.parameters.require("orderId")
                guard asked == environment, let transactions = await store.order(orderId, bundleId: bundleId) else {
                    return try Self.json(["status": 1])
                }
                var signed: [String] = []
                for transaction in transactions {
                    let product = await store.product(bundleId: bundleId, productId: transaction.productId)
                    signed.append(try signedPayloads.sign(signedPayloads.fields(of: transaction, product: product, environment: environment, signedDate: Date())))
                }
                return try Self.json(["status": AnyEncodable(0), "signedTransactions": AnyEncodable(signed)])
            }

            router.post(RouterPath(prefix + "inApps/v1/notifications/test")) { request, context -> Response in
                let (app, refusal) = try await authorized(request)
                guard let bundleId = app else { return refusal! }
                guard asked == environment, let url = try await store.app(bundleId).notificationURL else {
                    return try Self.appleError(4_040_007, "An error that indicates the App Store server couldn’t find a notifications URL for your app in this environment.", status: .notFound)
                }
                let token = try await notifier.enqueueAppNotification(type: "TEST", subtype: nil, bundleId: bundleId, url: url, at: await store.now)
                return try Self.json(["testNotificationToken": token])
            }

            router.get(RouterPath(prefix + "inApps/v1/notifications/test/:token")) { request, context -> Response in
                let (app, refusal) = try await authorized(request)
                guard let bundleId = app else { return refusal! }
                let token = try context.parameters.require("token")
                guard let delivery = await notifier.delivery(token), delivery.bundleId == bundleId, !delivery.sendAttempts.isEmpty else {
                    return try Self.appleError(4_040_008, "Either the test notification doesn't exist, or its result isn't available yet.", status: .notFound)
                }
                return try Self.json(["signedPayload": AnyEncodable(delivery.signedPayload), "sendAttempts": AnyEncodable(delivery.sendAttempts)])
            }
        }
    }

    /// Apple's checks of a `ConsumptionRequest` (V2); nil when it passes.
    static func checkConsumption(_ body: [String: Any], productType: ProductType, familyShared: Bool) throws -> Response? {
        guard !familyShared else {
            return try appleError(4_000_185, "Invalid request. Consumption information is not supported for family-shared transactions.", status: .badRequest)
        }
        guard body["customerConsented"] as? Bool == true else {
            return try appleError(4_000_035, "Invalid request. The customer consented field is invalid.", status: .badRequest)
        }
        let statuses = ["DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER"]
        guard let delivery = body["deliveryStatus"] as? String, statuses.contains(delivery) else {
            return try appleError(4_000_036, "Invalid request. The delivery status field is invalid.", status: .badRequest)
        }
        guard body["sampleContentProvided"] is Bool else {
            return try appleError(4_000_041, "Invalid request. The sample content provided field is invalid.", status: .badRequest)
        }
        if let preference = body["refundPreference"], !["DECLINE", "GRANT_FULL", "GRANT_PRORATED"].contains(preference as? String ?? "") {
            return try appleError(4_000_044, "Invalid request. The refund preference field is invalid.", status: .badRequest)
        }
        if let percentage = body["consumptionPercentage"] {
            guard productType != .autoRenewable else {
                return try appleError(4_000_209, "Invalid request. Consumption percentage is not allowed for auto-renewable subscriptions.", status: .badRequest)
            }
            guard let value = (percentage as? NSNumber)?.intValue, (0...100_000).contains(value) else {
                return try appleError(4_000_208, "Invalid request. The consumption percentage is out of range.", status: .badRequest)
            }
            guard delivery == "DELIVERED" || value == 0 else {
                return try appleError(4_000_210, "Invalid request. Undelivered content must have a consumption percentage of 0.", status: .badRequest)
            }
        }
        // A prorated refund of anything but an auto-renewable needs a share strictly between none and all.
        if body["refundPreference"] as? String == "GRANT_PRORATED", productType != .autoRenewable {
            guard let value = (body["consumptionPercentage"] as? NSNumber)?.intValue, value > 0, value < 100_000 else {
                return try appleError(4_000_208, "Invalid request. GRANT_PRORATED needs a consumption percentage above 0 and below 100000.", status: .badRequest)
            }
        }
        return nil
    }
}

/// Any encodable value, for answers of mixed values.
struct AnyEncodable: Encodable, Sendable {
    let encode: @Sendable (any Encoder) throws -> Void

    init(_ value: some Encodable & Sendable) {
        encode = { try value.encode(to: $0) }
    }

    func encode(to encoder: any Encoder) throws {
        try encode(encoder)
    }
}

extension Int64 {
    var double: Double { Double(self) }
}
