import LedgerDomain

extension AppStoreSimulator {
    /// Defines `consumable` in `bundleId`, has `users` new users (`bench-0`, `bench-1`, …) buy 1 to
    /// 3 of it each, and returns their app receipts, in user order: ready-made load for benchmarks.
    public func issueReceipts(bundleId: String, consumable: String, users: Int) async throws -> [String] {
        _ = try await store.putProduct(bundleId: bundleId, SimulatedProduct(productId: consumable, type: .consumable))
        var receipts: [String] = []
        receipts.reserveCapacity(users)
        for index in 0..<users {
            let userId = try await store.createUser("bench-\(index)")
            _ = try await store.purchase(userId: userId, bundleId: bundleId, productId: consumable, quantity: 1 + index % 3)
            receipts.append(signer.issue(try await store.appReceiptPayload(userId: userId, bundleId: bundleId)))
        }
        return receipts
    }
}
