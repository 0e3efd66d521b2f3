import AppStore
import AppStoreSimulator
import Crypto
import Foundation
import LedgerApplication
import LedgerDomain
import X509

/// What verifying an App Store JWS costs: `SignedPayloadVerifier.verify` (parse, chain check,
/// signature, payload decoding, bundle and environment) against the bare ES256 check of the same
/// signatures with an already-parsed key, in the same run.
///
/// The payloads are StoreKit 2 transactions in Apple's shape, each signed by the simulator's
/// certificate authority (a chain like Apple's: leaf, intermediate, root). The first verification
/// validates the chain; the others find it remembered, as a server does for every payload after
/// the first from the same leaf.
public struct SignedPayloadBenchmark: Sendable {
    public struct Options: Sendable {
        public var payloads: Int
        public var concurrency: Int

        public init(payloads: Int = 20_000, concurrency: Int = 16) {
            self.payloads = payloads
            self.concurrency = concurrency
        }
    }

    /// Microseconds at the 50th and 99th percentile, and the rate over the whole run.
    public struct Figures: Sendable {
        public let p50: Double
        public let p99: Double
        public let perSecond: Double
    }

    public struct Result: Sendable {
        public let payloads: Int
        public let concurrency: Int
        /// The first verification, which validates the chain.
        public let firstMicroseconds: Double
        /// One at a time, the chain remembered.
        public let verify: Figures
        /// The same signatures checked with the bare key, one at a time.
        public let bareSignature: Figures
        /// `concurrency` verifications in flight.
        public let concurrentPerSecond: Double
    }

    /// A StoreKit 2 transaction as the App Store signs it (the fields this benchmark decodes).
    struct Transaction: AppStoreSignedPayload, Codable {
        let transactionId: String
        let originalTransactionId: String
        let bundleId: String
        let productId: String
        let purchaseDate: Date
        let originalPurchaseDate: Date
        let quantity: Int
        let type: String
        let inAppOwnershipType: String
        let signedDate: Date
        let environment: String
        let transactionReason: String
        let storefront: String
        let price: Int
        let currency: String

        var payloadBundleId: String? { bundleId }
        var payloadEnvironment: String? { environment }
    }

    public init() {}

    public func run(_ options: Options) async throws -> Result {
        guard options.payloads >= 1, options.concurrency >= 1 else {
            throw StoreError.invalidInput("a signed payload benchmark needs at least 1 payload and 1 verification in flight")
        }
        let now = Date()
        let authority = try SimulatorCertificateAuthority(now: now)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        var signed: [String] = []
        signed.reserveCapacity(options.payloads)
        for index in 0..<options.payloads {
            let id = String(2_000_000_000_000_000 + index)
            let transaction = Transaction(
                transactionId: id, originalTransactionId: id, bundleId: "com.example.bench", productId: "coins.100",
                purchaseDate: now, originalPurchaseDate: now, quantity: 1, type: "Consumable", inAppOwnershipType: "PURCHASED",
                signedDate: now, environment: "Sandbox", transactionReason: "PURCHASE", storefront: "USA", price: 990, currency: "USD"
            )
            signed.append(try authority.sign(try encoder.encode(transaction)))
        }

        let verifier = SignedPayloadVerifier(trustedRoots: [authority.root])
        let clock = ContinuousClock()
        let first = try await clock.measure {
            _ = try await verifier.verify(signed[0], as: Transaction.self, bundleId: "com.example.bench", environment: .sandbox)
        }

        var verifyTimes: [Double] = []
        verifyTimes.reserveCapacity(signed.count)
        let verifyStart = clock.now
        for jws in signed {
            let elapsed = try await clock.measure {
                _ = try await verifier.verify(jws, as: Transaction.self, bundleId: "com.example.bench", environment: .sandbox)
            }
            verifyTimes.append(Self.microseconds(elapsed))
        }
        let verifySeconds = Self.seconds(clock.now - verifyStart)

        // The baseline: the same ES256 checks with the key and signatures already in hand.
        guard let key = P256.Signing.PublicKey(authority.leaf.publicKey) else { throw StoreError.invalidInput("the simulator's leaf key is not P-256") }
        let inputs = try signed.map { jws -> (Data, P256.Signing.ECDSASignature) in
            let parts = jws.split(separator: ".")
            return (Data("\(parts[0]).\(parts[1])".utf8), try P256.Signing.ECDSASignature(rawRepresentation: Base64URL.decode(parts[2]) ?? Data()))
        }
        var bareTimes: [Double] = []
        bareTimes.reserveCapacity(inputs.count)
        let bareStart = clock.now
        for (input, signature) in inputs {
            let start = clock.now
            guard key.isValidSignature(signature, for: input) else { throw StoreError.invalidInput("a bare signature check failed: the benchmark's own signatures are wrong") }
            bareTimes.append(Self.microseconds(clock.now - start))
        }
        let bareSeconds = Self.seconds(clock.now - bareStart)

        let concurrentStart = clock.now
        try await withThrowingTaskGroup(of: Void.self) { [signed] group in
            for worker in 0..<options.concurrency {
                group.addTask {
                    for index in stride(from: worker, to: signed.count, by: options.concurrency) {
                        _ = try await verifier.verify(signed[index], as: Transaction.self, bundleId: "com.example.bench", environment: .sandbox)
                    }
                }
            }
            try await group.waitForAll()
        }
        let concurrentSeconds = Self.seconds(clock.now - concurrentStart)

        return Result(
            payloads: signed.count, concurrency: options.concurrency, firstMicroseconds: Self.microseconds(first),
            verify: Self.figures(verifyTimes, seconds: verifySeconds), bareSignature: Self.figures(bareTimes, seconds: bareSeconds),
            concurrentPerSecond: Double(signed.count) / concurrentSeconds
        )
    }

    static func figures(_ samples: [Double], seconds: Double) -> Figures {
        let sorted = samples.sorted()
        func at(_ fraction: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }
        return Figures(p50: at(0.50), p99: at(0.99), perSecond: Double(samples.count) / seconds)
    }

    static func microseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    }

    static func seconds(_ duration: Duration) -> Double {
        microseconds(duration) / 1e6
    }
}
