import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: Verification

    /// What a verify of `payload` answers from; `nil` when the receipt names an app or user this
    /// simulator does not know (it was signed by a simulator with the same key but other state).
    func verificationView(for payload: SimulatorReceiptPayload) -> VerificationView? {
        guard let app = apps[payload.bundleId], users.contains(payload.userId) else { return nil }
        let key = UserApp(userId: payload.userId, bundleId: payload.bundleId)
        materialize(key)
        let all = (transactionsByUser[key] ?? []).compactMap { transactions[$0] }
        let covered = payload.transactionIds.compactMap { transactions[$0] }
        guard covered.count == payload.transactionIds.count else { return nil }
        return VerificationView(
            now: now,
            sharedSecret: app.sharedSecret,
            covered: covered,
            all: all.filter { !$0.leavesReceipts }.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) },
            subscriptions: subscriptionViews(key),
            firstPurchase: all.map(\.purchaseDate).min()
        )
    }

    /// Product types of a bundle, to tell whether a receipt covers an auto-renewable.
    func products(bundleId: String) throws -> [SimulatedProduct] {
        try app(bundleId).products.values.sorted { $0.productId < $1.productId }
    }

    // MARK: Faults

    func setFaults(_ faults: SimulatorFaults) throws -> SimulatorFaults {
        guard faults.failNext >= 0, (0...60_000).contains(faults.latencyMilliseconds), (0...60_000).contains(faults.trickleMilliseconds) else {
            throw SimulatorError.badRequest("failNext must be 0 or more, latencyMilliseconds and trickleMilliseconds from 0 to 60000")
        }
        guard faults.failNext == 0 || faults.failStatus != 0 else {
            throw SimulatorError.badRequest("failStatus must be a non-zero status such as 21005")
        }
        self.faults = faults
        return faults
    }

    var currentFaults: SimulatorFaults { faults }

    /// The fault for one verify call: the status to answer instead (counting it down), the latency
    /// and how slowly the body goes out.
    func takeFault() -> (status: Int?, isRetryable: Bool, latencyMilliseconds: Int, trickleMilliseconds: Int) {
        if faults.failNext > 0 {
            faults.failNext -= 1
            return (faults.failStatus, faults.isRetryable, faults.latencyMilliseconds, faults.trickleMilliseconds)
        }
        return (nil, false, faults.latencyMilliseconds, faults.trickleMilliseconds)
    }
}
