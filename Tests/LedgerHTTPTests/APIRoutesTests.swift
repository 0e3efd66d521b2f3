import Hummingbird
import LedgerApplication
import LedgerHTTP
import LedgerStore
import LedgerTesting
import Testing

@Suite struct APIRoutesTests {
    @Test func routerPathsUseHummingbirdParameters() {
        let route = APIRoute(.get, "/v1/apps/{bundleId}/users/{userId}/balances", .read)
        #expect(route.routerPath == "/v1/apps/:bundleId/users/:userId/balances")
    }
}
