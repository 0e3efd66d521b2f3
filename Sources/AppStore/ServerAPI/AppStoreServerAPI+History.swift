import LedgerApplication
import LedgerDomain

/// Apple's history, as the backfill use case asks for it: the app's stored key parsed here, and
/// the client's errors in the use case's terms.
extension AppStoreServerAPI: TransactionHistorySource {
    public func history(of transactionId: String, app: String, environment: StoreEnvironment, key: ServerAPIKey) async throws -> [HistoryTransaction] {
        let parsed: AppStoreServerAPIKey
        do {
            parsed = try AppStoreServerAPIKey(keyID: key.keyID, issuerID: key.issuerID, privateKeyPEM: key.privateKeyPEM)
        } catch {
            throw TransactionHistoryError.failed("the stored App Store Server API key of \(app) cannot be used: \(error.description)")
        }
        do {
            return try await history(of: transactionId, bundleId: app, environment: environment, key: parsed)
                .map { HistoryTransaction(fields: $0.fields, signedDate: $0.signedDate) }
        } catch .transactionNotFound(let id) {
            throw TransactionHistoryError.transactionNotFound(id)
        } catch .rateLimited(let until) {
            throw TransactionHistoryError.rateLimited(until: until, AppStoreServerAPIError.rateLimited(until: until).description)
        } catch {
            throw TransactionHistoryError.failed(error.description)
        }
    }
}
