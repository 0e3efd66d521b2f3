import AppStore
import LedgerDomain
import Testing

@Suite struct AppStoreConfigurationTests {
    @Test func defaultsToApplesURLsAndReadsOverridesFromTheEnvironment() {
        let defaults = AppStoreConfiguration.fromEnvironment([:])
        #expect(defaults.productionURL == "https://buy.itunes.apple.com/verifyReceipt")
        #expect(defaults.sandboxURL == "https://sandbox.itunes.apple.com/verifyReceipt")
        let local = AppStoreConfiguration.fromEnvironment([
            "LEDGER_APPSTORE_PRODUCTION_URL": "http://127.0.0.1:8090/verifyReceipt",
            "LEDGER_APPSTORE_SANDBOX_URL": " ",
        ])
        #expect(local.url(for: .production) == "http://127.0.0.1:8090/verifyReceipt")
        #expect(local.url(for: .sandbox) == "https://sandbox.itunes.apple.com/verifyReceipt", "a blank value is no value")
    }
}
