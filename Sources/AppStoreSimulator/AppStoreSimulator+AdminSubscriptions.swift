import AppStore
import Foundation
import Hummingbird
import LedgerDomain

/// The admin routes for what happens after a purchase: the app finishing transactions, families,
/// and the life of a subscription (billing trouble, auto-renew), as the customer's bank and the
/// customer's settings would make it.
extension AppStoreSimulator {
    struct FamilyBody: Decodable { var organizerUserId: String; var memberUserId: String }
    struct BillingBody: Decodable { var failing: Bool; var gracePeriodDays: Int? }
    struct AutoRenewBody: Decodable { var enabled: Bool }

    struct FamilyView: Encodable { var organizerUserId: String; var memberUserId: String }

    /// A refund's answer: the transaction's own keys, plus a label saying what kind of refund it stands for.
    ///
    /// Apple's sandbox never sends `cancellation_date`; production receipts carry it once Apple
    /// refunds a purchase. The simulator renders the refund in either environment, so its answer
    /// says that it simulates a production refund.
    struct RefundView: Encodable {
        static let note = "a simulated production refund: Apple's sandbox never sends cancellation_date, production receipts do once Apple refunds"

        var transaction: SimulatorTransaction

        private enum Keys: String, CodingKey { case simulatedRefund, note }

        func encode(to encoder: any Encoder) throws {
            try transaction.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(true, forKey: .simulatedRefund)
            try container.encode(Self.note, forKey: .note)
        }
    }

    /// A finish's answer: the transaction's own keys, plus whether receipts leave it out from now on.
    struct FinishView: Encodable {
        var transaction: SimulatorTransaction

        private enum Keys: String, CodingKey { case leavesReceipts }

        func encode(to encoder: any Encoder) throws {
            try transaction.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(transaction.leavesReceipts, forKey: .leavesReceipts)
        }
    }

    func addSubscriptionAdminRoutes<Context: RequestContext>(to admin: RouterGroup<Context>) {
        let store = self.store

        admin.post("family") { request, context -> Response in
            guard let body = try await Self.decode(FamilyBody.self, request, context) else {
                throw SimulatorError.badRequest("send {\"organizerUserId\", \"memberUserId\"}")
            }
            let created = try await store.linkFamily(organizer: body.organizerUserId, member: body.memberUserId)
            return try Self.json(
                FamilyView(organizerUserId: body.organizerUserId, memberUserId: body.memberUserId),
                status: created ? .created : .ok
            )
        }
        admin.post("transactions/:transactionId/finish") { _, context -> Response in
            let transaction = try await store.finish(transactionId: try context.parameters.require("transactionId"))
            return try Self.json(FinishView(transaction: transaction))
        }
        admin.get("subscriptions/:originalTransactionId") { _, context -> Response in
            try Self.json(try await store.subscriptionStatus(originalTransactionId: try context.parameters.require("originalTransactionId")))
        }
        admin.post("subscriptions/:originalTransactionId/billing") { request, context -> Response in
            guard let body = try await Self.decode(BillingBody.self, request, context) else {
                throw SimulatorError.badRequest("send {\"failing\": true, \"gracePeriodDays\": 16} or {\"failing\": false}")
            }
            return try Self.json(try await store.setBilling(
                originalTransactionId: try context.parameters.require("originalTransactionId"),
                failing: body.failing,
                gracePeriodDays: body.gracePeriodDays
            ))
        }
        admin.post("subscriptions/:originalTransactionId/auto-renew") { request, context -> Response in
            guard let body = try await Self.decode(AutoRenewBody.self, request, context) else {
                throw SimulatorError.badRequest("send {\"enabled\": false} or {\"enabled\": true}")
            }
            return try Self.json(try await store.setAutoRenew(
                originalTransactionId: try context.parameters.require("originalTransactionId"),
                enabled: body.enabled
            ))
        }
    }
}
