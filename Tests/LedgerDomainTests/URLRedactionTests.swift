import LedgerDomain
import Testing

@Suite("URLs are shown without their password")
struct URLRedactionTests {
    @Test("the password of a user:password@ form is masked, parseable or not", arguments: [
        ("postgres://ledger:s3cret@db.example.com:5432/ledger", "postgres://ledger:****@db.example.com:5432/ledger"),
        // An unencoded space: URLComponents cannot parse it, the mask still applies.
        ("postgres://ledger:s3 cret@db.example.com/ledger", "postgres://ledger:****@db.example.com/ledger"),
        // Unencoded '@' and '/' in the password: everything up to the last '@' goes.
        ("postgresql://ledger:p@ss/w@rd@db/ledger", "postgresql://ledger:****@db/ledger"),
        ("mysql://root:s3cret@localhost/x", "mysql://root:****@localhost/x"),
        ("ledger:s3cret@db.example.com/ledger", "ledger:****@db.example.com/ledger"),
        ("https://operator:s3cret@appstore.example/verifyReceipt", "https://operator:****@appstore.example/verifyReceipt"),
    ])
    func masked(_ text: String, _ expected: String) {
        #expect(URLRedaction.masked(text) == expected)
        #expect(!URLRedaction.masked(text).contains("s3") && !URLRedaction.masked(text).contains("rd@db/"))
    }

    @Test("a URL without a password is left as it is", arguments: [
        "postgres://ledger@db.example.com/ledger",
        "postgres://db.example.com:5432/ledger?sslmode=require",
        "https://buy.itunes.apple.com/verifyReceipt",
        "not a url at all",
    ])
    func unchanged(_ text: String) {
        #expect(URLRedaction.masked(text) == text)
    }
}
