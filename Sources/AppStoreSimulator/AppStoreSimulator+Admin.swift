import AppStore
import Foundation
import Hummingbird
import LedgerDomain

/// The simulator's admin API: what App Store Connect, a test device and Apple support would do.
extension AppStoreSimulator {
    struct AppBody: Decodable { var sharedSecret: String?; var notificationURL: String? }
    struct ProductBody: Decodable {
        var type: ProductType
        var duration: SubscriptionDuration?
        var group: String?
        var level: Int?
        var familyShareable: Bool?
        var introOffer: IntroOffer?
        var price: String?
        var currency: String?
        var advancedCommerce: Bool?
        var storefrontPrices: [String: SimulatedProduct.StorefrontPrice]?
    }
    struct UserBody: Decodable { var userId: String?; var storefront: String? }
    struct PurchaseBody: Decodable { var userId: String; var bundleId: String; var productId: String; var quantity: Int? }
    struct RestoreBody: Decodable { var userId: String; var bundleId: String }
    struct CancelBody: Decodable {
        var reason: Int?
        /// A prorated refund: the share refunded, in milliunits of a percent (40000 = 40 %).
        var percentage: Int?
    }
    struct RefundRequestBody: Decodable { var reason: String? }
    struct AppNotificationBody: Decodable { var type: String; var subtype: String? }
    struct AdvanceBody: Decodable { var seconds: Double?; var minutes: Double? }

    struct AppView: Encodable {
        var bundleId: String
        var sharedSecret: String
        var notificationURL: String?
        var products: [SimulatedProduct]
    }
    struct UserView: Encodable { var userId: String; var storefront: String }
    struct ClockView: Encodable { var now: Date; var nowMs: Int64; var offsetSeconds: Double; var environment: StoreEnvironment }
    struct PurchaseView: Encodable {
        /// The new transaction; for a change of plan that waits for the next renewal, the current period's.
        var transaction: SimulatorTransaction
        /// Set when the purchase changed the plan of a subscription in the product's group.
        var change: SimulatorPlanChange?
        /// An iOS 7 style app receipt with every transaction of the user in the app.
        var receipt: String
        /// An iOS 6 style receipt of this transaction alone.
        var transactionReceipt: String
        /// The transaction as StoreKit 2 gives it to the app (`Transaction.jwsRepresentation`).
        var signedTransaction: String
        /// The order id on the customer's e-mail receipt (Look Up Order ID finds it).
        var orderId: String
    }
    struct RestoreView: Encodable { var transactions: [SimulatorTransaction]; var receipt: String }
    struct UserAppView: Encodable {
        var userId: String
        var bundleId: String
        var transactions: [SimulatorTransaction]
        var receipt: String
        /// StoreKit 2's view: every transaction but the restores StoreKit 1 made (`Transaction.all`).
        var signedTransactions: [String]
    }

    func addAdminRoutes(to router: Router<some RequestContext>) {
        let store = self.store
        let signer = self.signer
        let signedPayloads = self.signedPayloads
        let notifier = self.notifier
        let environment = configuration.environment
        let admin = router.group("admin")
        /// A transaction as StoreKit 2 signs it now, with its product's price. Signed at the real
        /// time, as Apple signs, whatever the simulator's clock says of the purchase.
        @Sendable func signed(_ transaction: SimulatorTransaction) async throws -> String {
            let product = await store.product(bundleId: transaction.bundleId, productId: transaction.productId)
            return try signedPayloads.sign(signedPayloads.fields(of: transaction, product: product, environment: environment, signedDate: Date()))
        }

        admin.get("root.pem") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "application/x-pem-file"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: try signedPayloads.authority.rootPEM())))
        }
        admin.get("notifications") { _, _ -> Response in
            try Self.json(["notifications": await notifier.all()])
        }

        admin.put("apps/:bundleId") { request, context -> Response in
            let bundleId = try context.parameters.require("bundleId")
            let body = try await Self.decode(AppBody.self, request, context, allowEmpty: true) ?? AppBody()
            let app = try await store.putApp(bundleId: bundleId, sharedSecret: body.sharedSecret, notificationURL: body.notificationURL)
            return try Self.json(AppView(bundleId: app.bundleId, sharedSecret: app.sharedSecret, notificationURL: app.notificationURL,
                                         products: app.products.values.sorted { $0.productId < $1.productId }))
        }
        admin.post("apps/:bundleId/notifications") { request, context -> Response in
            let bundleId = try context.parameters.require("bundleId")
            guard let body = try await Self.decode(AppNotificationBody.self, request, context),
                  ["EXTERNAL_PURCHASE_TOKEN", "RESCIND_CONSENT", "TEST"].contains(body.type)
            else {
                throw SimulatorError.badRequest("send {\"type\": \"EXTERNAL_PURCHASE_TOKEN\" | \"RESCIND_CONSENT\" | \"TEST\", \"subtype\"?}")
            }
            guard let url = try await store.app(bundleId).notificationURL else {
                throw SimulatorError.conflict("\(bundleId) has no notification URL: PUT /admin/apps/\(bundleId) with {\"notificationURL\"} first")
            }
            let subtype = body.subtype ?? (body.type == "EXTERNAL_PURCHASE_TOKEN" ? "UNREPORTED" : nil)
            let uuid = try await notifier.enqueueAppNotification(type: body.type, subtype: subtype, bundleId: bundleId, url: url,
                                                                 at: await store.now)
            return try Self.json(["notificationUUID": uuid], status: .accepted)
        }
        admin.get("apps/:bundleId") { _, context -> Response in
            let app = try await store.app(try context.parameters.require("bundleId"))
            return try Self.json(AppView(
                bundleId: app.bundleId, sharedSecret: app.sharedSecret, notificationURL: app.notificationURL,
                products: app.products.values.sorted { $0.productId < $1.productId }
            ))
        }
        admin.put("apps/:bundleId/products/:productId") { request, context -> Response in
            let bundleId = try context.parameters.require("bundleId")
            let productId = try context.parameters.require("productId")
            guard let body = try await Self.decode(ProductBody.self, request, context) else {
                throw SimulatorError.badRequest("send {\"type\": \"auto_renewable\", \"duration\": \"P1M\"}")
            }
            let product = try await store.putProduct(
                bundleId: bundleId,
                SimulatedProduct(
                    productId: productId, type: body.type, duration: body.duration, group: body.group, level: body.level,
                    familyShareable: body.familyShareable ?? false, introOffer: body.introOffer, price: body.price, currency: body.currency,
                    advancedCommerce: body.advancedCommerce ?? false, storefrontPrices: body.storefrontPrices ?? [:]
                )
            )
            return try Self.json(product)
        }
        admin.get("apps/:bundleId/products") { _, context -> Response in
            try Self.json(try await store.products(bundleId: try context.parameters.require("bundleId")))
        }
        admin.get("apps/:bundleId/sales-reports/:date") { _, context -> Response in
            let date = try context.parameters.require("date")
            let text = try await store.salesReport(bundleId: try context.parameters.require("bundleId"), day: date)
            var headers = HTTPFields()
            headers[.contentType] = "application/a-gzip"
            headers[.contentDisposition] = "attachment; filename=S_D_\(SimulatorStore.vendorNumber)_\(date.replacingOccurrences(of: "-", with: "")).txt.gz"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Gzip.compress(Data(text.utf8)))))
        }
        admin.post("users") { request, context -> Response in
            let body = try await Self.decode(UserBody.self, request, context, allowEmpty: true) ?? UserBody()
            let userId = try await store.createUser(body.userId, storefront: body.storefront)
            return try Self.json(UserView(userId: userId, storefront: body.storefront ?? "USA"), status: .created)
        }
        admin.get("users/:userId/apps/:bundleId") { _, context -> Response in
            let userId = try context.parameters.require("userId")
            let bundleId = try context.parameters.require("bundleId")
            let transactions = try await store.transactions(userId: userId, bundleId: bundleId)
            let receipt = signer.issue(try await store.appReceiptPayload(userId: userId, bundleId: bundleId))
            var signedTransactions: [String] = []
            for transaction in transactions where transaction.restoredTransactionId == nil { signedTransactions.append(try await signed(transaction)) }
            return try Self.json(UserAppView(userId: userId, bundleId: bundleId, transactions: transactions, receipt: receipt,
                                             signedTransactions: signedTransactions))
        }
        admin.post("purchases") { request, context -> Response in
            guard let body = try await Self.decode(PurchaseBody.self, request, context) else {
                throw SimulatorError.badRequest("send {\"userId\", \"bundleId\", \"productId\", \"quantity\"?}")
            }
            let purchase = try await store.purchase(
                userId: body.userId, bundleId: body.bundleId, productId: body.productId, quantity: body.quantity ?? 1
            )
            let receipt = signer.issue(try await store.appReceiptPayload(userId: body.userId, bundleId: body.bundleId))
            let transactionReceipt = signer.issue(await store.transactionReceiptPayload(purchase.transaction))
            // 202 when nothing was bought yet: a downgrade or crossgrade waits for the next renewal.
            return try Self.json(
                PurchaseView(transaction: purchase.transaction, change: purchase.change, receipt: receipt, transactionReceipt: transactionReceipt,
                             signedTransaction: try await signed(purchase.transaction), orderId: SimulatorStore.orderId(of: purchase.transaction)),
                status: purchase.createdTransaction ? .created : .accepted
            )
        }
        admin.post("restores") { request, context -> Response in
            guard let body = try await Self.decode(RestoreBody.self, request, context) else {
                throw SimulatorError.badRequest("send {\"userId\", \"bundleId\"}")
            }
            let restored = try await store.restore(userId: body.userId, bundleId: body.bundleId)
            let receipt = signer.issue(try await store.appReceiptPayload(userId: body.userId, bundleId: body.bundleId))
            return try Self.json(RestoreView(transactions: restored, receipt: receipt))
        }
        admin.post("transactions/:transactionId/cancel") { request, context -> Response in
            let body = try await Self.decode(CancelBody.self, request, context, allowEmpty: true) ?? CancelBody()
            let transaction = try await store.cancel(
                transactionId: try context.parameters.require("transactionId"), reason: body.reason ?? 0, percentage: body.percentage
            )
            return try Self.json(RefundView(transaction: transaction))
        }
        admin.post("transactions/:transactionId/refund-request") { request, context -> Response in
            let body = try await Self.decode(RefundRequestBody.self, request, context, allowEmpty: true) ?? RefundRequestBody()
            let transaction = try await store.requestRefund(transactionId: try context.parameters.require("transactionId"),
                                                            reason: body.reason ?? "UNSATISFIED_WITH_PURCHASE")
            return try Self.json(["transactionId": transaction.transactionId, "notificationType": "CONSUMPTION_REQUEST"], status: .accepted)
        }
        addSubscriptionAdminRoutes(to: admin)
        admin.get("clock") { _, _ -> Response in
            try Self.json(await Self.clockView(store))
        }
        admin.post("clock/advance") { request, context -> Response in
            guard let body = try await Self.decode(AdvanceBody.self, request, context),
                  body.seconds != nil || body.minutes != nil
            else { throw SimulatorError.badRequest("send {\"minutes\": 5} or {\"seconds\": 300}") }
            _ = try await store.advance(seconds: (body.seconds ?? 0) + (body.minutes ?? 0) * 60)
            return try Self.json(await Self.clockView(store))
        }
        admin.get("faults") { _, _ -> Response in
            try Self.json(await store.currentFaults)
        }
        admin.put("faults") { request, context -> Response in
            guard let faults = try await Self.decode(SimulatorFaults.self, request, context) else {
                throw SimulatorError.badRequest("send {\"failNext\": 3, \"failStatus\": 21005, \"latencyMilliseconds\": 0}")
            }
            return try Self.json(try await store.setFaults(faults))
        }
        admin.delete("faults") { _, _ -> Response in
            try Self.json(try await store.setFaults(SimulatorFaults()))
        }
    }

    private static func clockView(_ store: SimulatorStore) async -> ClockView {
        let now = await store.now
        return ClockView(now: now, nowMs: now.milliseconds, offsetSeconds: await store.offsetSeconds, environment: store.environment)
    }

    /// The JSON body as `T`; `nil` for an empty body when `allowEmpty`, else a 400 that says what is wrong.
    static func decode<T: Decodable>(
        _ type: T.Type,
        _ request: Request,
        _ context: some RequestContext,
        allowEmpty: Bool = false
    ) async throws -> T? {
        let bytes = try await request.body.collect(upTo: context.maxUploadSize)
        if bytes.readableBytes == 0 {
            if allowEmpty { return nil }
            throw SimulatorError.badRequest("the request needs a JSON body")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes.readableBytesView))
        } catch let DecodingError.keyNotFound(key, _) {
            throw SimulatorError.badRequest("the JSON body needs '\(key.stringValue)'")
        } catch let DecodingError.dataCorrupted(context) {
            throw SimulatorError.badRequest("the JSON body could not be read: \(context.debugDescription)")
        } catch let DecodingError.typeMismatch(_, context) {
            throw SimulatorError.badRequest("'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type")
        } catch {
            throw SimulatorError.badRequest("the JSON body could not be read: \(error)")
        }
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(SimulatorStore.iso(date))
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}
