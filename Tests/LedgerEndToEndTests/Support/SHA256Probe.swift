import Crypto
import Foundation

/// The request digest the API keys idempotent requests by: SHA-256 of "METHOD path\n" and the body.
struct SHA256Probe {
    private(set) var digest = Data()

    mutating func update(_ line: String, _ body: Data) {
        var hasher = SHA256()
        hasher.update(data: Data(line.utf8))
        hasher.update(data: body)
        digest = Data(hasher.finalize())
    }
}
