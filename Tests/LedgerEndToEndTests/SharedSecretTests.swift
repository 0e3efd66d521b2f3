import Crypto
import Foundation
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// App Store shared secrets as an operator handles them: set through the command line, sealed
/// with a key from the environment or a private file, never printed; a key problem said in words.
@Suite struct SharedSecretTests {
    static let secret = "5ec2e7c0ffee5ec2e7c0ffee5ec2e7c0"

    @Test func theCommandLineSealsSecretsWithAPrivateKeyFileAndNeverPrintsThem() async throws {
        try await APIHarness.run { api in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-secret-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let keyFile = folder.appendingPathComponent("secret.key")
            let key = SecretSealer.generateKey().withUnsafeBytes { Data($0) }.base64EncodedString()
            try Data((key + "\n").utf8).write(to: keyFile)
            chmod(keyFile.path, 0o644)
            let environment: [String: String?] = [
                "LEDGER_SECRET_KEY_FILE": keyFile.path, "LEDGER_SECRET_KEY": nil, "APP_SECRET": Self.secret,
            ]
            let app = "com.example.sealed"

            let exposed = try await CommandLineTests.ledger(["apps", "add", app, "--shared-secret-env", "APP_SECRET"],
                                                            database: api.settings, environment: environment)
            #expect(exposed.status != 0)
            #expect(exposed.errors.contains("chmod 600 \(keyFile.path)"), "\(exposed.errors)")
            #expect(!(exposed.output + exposed.errors).contains(Self.secret))

            chmod(keyFile.path, 0o600)
            let added = try await CommandLineTests.ledger(["apps", "add", app, "--shared-secret-env", "APP_SECRET"],
                                                          database: api.settings, environment: environment)
            #expect(added.status == 0, "\(added.errors)")
            #expect(added.output.contains("registered \(app) with its shared secret"))
            #expect(!(added.output + added.errors).contains(Self.secret))
            let sealer = try SecretSealer.load(file: keyFile)
            #expect(try await AppRegistry(client: api.client, logger: APIHarness.logger, secrets: sealer).sharedSecret(of: app) == Self.secret)

            let listed = try await CommandLineTests.ledger(["apps", "list"], database: api.settings, environment: environment)
            #expect(listed.output.contains("\(app)\tset (sealed)"), "\(listed.output)")

            // Another key: the list says which apps no longer open, and why, without any secret.
            let otherKey = SecretSealer.generateKey().withUnsafeBytes { Data($0) }.base64EncodedString()
            let other = try await CommandLineTests.ledger(["apps", "list"], database: api.settings, environment: [
                "LEDGER_SECRET_KEY": otherKey, "LEDGER_SECRET_KEY_FILE": nil,
            ])
            #expect(other.output.contains("\(app)\tset (sealed, does not open with the configured key)"), "\(other.output)")
            #expect(other.errors.contains(sealer.keyID), "\(other.errors)")
            #expect(!(other.output + other.errors).contains(Self.secret))
        }
    }

    @Test func aDatabaseURLThatDoesNotParseIsNeverEchoedWithItsPassword() async throws {
        try await APIHarness.run { api in
            for url in ["postgres://ledger:hunter2 and more@db.example.com/ledger", "mysql://ledger:hunter2@db.example.com/ledger"] {
                let run = try await CommandLineTests.ledger(["apps", "list"], database: api.settings, environment: ["LEDGER_DATABASE_URL": url])
                #expect(run.status != 0)
                #expect(run.errors.contains("LEDGER_DATABASE_URL"), "\(run.errors)")
                #expect(!(run.output + run.errors).contains("hunter2"), "\(run.errors)")
            }
        }
    }

    @Test func aReceiptOfAnAppWhoseSecretDoesNotOpenIsRefusedNamingTheProblemAndRecordsNothing() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            // The secret sealed with a key the server does not have (a key rotated without resealing).
            let stranger = try SecretSealer(key: SecretSealer.generateKey(), origin: "another key")
            try await AppRegistry(client: api.client, logger: APIHarness.logger, secrets: stranger)
                .addApp(APIHarness.app, sharedSecret: Self.secret)
            let answer = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(answer.status == 500, "\(answer.text)")
            #expect(answer.errorCode == "shared_secret_unreadable")
            #expect(answer.errorMessage?.contains("secret key") == true)
            #expect(!answer.text.contains(Self.secret) && !answer.text.contains(stranger.keyID))
            let events = try await api.client.query("SELECT count(*) FROM ledger.events WHERE stream_id LIKE '%alice%'",
                                                    logger: APIHarness.logger).collect()
            #expect(try events.first?.decode(Int64.self) == 0)

            // Set again with the server's key, the same receipt is recorded.
            try await AppRegistry(client: api.client, logger: APIHarness.logger, secrets: api.secrets)
                .addApp(APIHarness.app, sharedSecret: Self.secret)
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
        }
    }
}
