import Crypto
import Foundation
import LedgerApplication
import LedgerStore
import Testing

@Suite("Shared secrets are sealed with a key that is configured, checked and never shown")
struct SecretSealerTests {
    static func sealer(_ origin: String = "a test key") throws -> SecretSealer {
        try SecretSealer(key: SecretSealer.generateKey(), origin: origin)
    }

    static func base64Key() -> String {
        SecretSealer.generateKey().withUnsafeBytes { Data($0) }.base64EncodedString()
    }

    static func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test("a sealed secret opens to itself, and its bytes do not hold it")
    func roundTrip() throws {
        let sealer = try Self.sealer()
        let secret = "0123456789abcdef0123456789abcdef"
        let first = try sealer.seal(secret, app: "com.example.app")
        let second = try sealer.seal(secret, app: "com.example.app")
        #expect(first != second, "a new nonce each time")
        #expect(first.range(of: Data(secret.utf8)) == nil)
        #expect(try sealer.open(first, sealedWith: sealer.keyID, app: "com.example.app") == secret)
        #expect(sealer.keyID.count == 16)
    }

    @Test("a sealed secret does not open for another app, nor once changed")
    func boundToItsApp() throws {
        let sealer = try Self.sealer()
        let sealed = try sealer.seal("s3cret", app: "com.example.app")
        let other = try #require(throws: SecretError.self) { try sealer.open(sealed, sealedWith: sealer.keyID, app: "com.example.other") }
        #expect(other.code == .unreadableSecret)
        #expect(other.message.contains("com.example.other"))
        var changed = sealed
        changed[changed.index(changed.startIndex, offsetBy: 20)] ^= 1
        #expect(throws: SecretError.self) { try sealer.open(changed, sealedWith: sealer.keyID, app: "com.example.app") }
    }

    @Test("another key says which key sealed it and which is configured, never the secret")
    func otherKey() throws {
        let sealedWith = try Self.sealer()
        let configured = try Self.sealer("LEDGER_SECRET_KEY")
        let sealed = try sealedWith.seal("s3cret-value", app: "com.example.app")
        let error = try #require(throws: SecretError.self) {
            try configured.open(sealed, sealedWith: sealedWith.keyID, app: "com.example.app")
        }
        #expect(error.code == .unreadableSecret)
        #expect(error.message.contains(sealedWith.keyID) && error.message.contains(configured.keyID))
        #expect(error.message.contains("LEDGER_SECRET_KEY"))
        #expect(!error.message.contains("s3cret"))
    }

    @Test("LEDGER_SECRET_KEY must be 32 bytes of base64, and its value is never repeated", arguments: [
        "not base64 at all!", Data(repeating: 7, count: 16).base64EncodedString(), Data(repeating: 7, count: 33).base64EncodedString(),
    ])
    func invalidKey(_ value: String) throws {
        let error = try #require(throws: SecretError.self) { try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY": value]) }
        #expect(error.code == .invalidKey)
        #expect(error.message.contains("LEDGER_SECRET_KEY"))
        #expect(!error.message.contains(value))
    }

    @Test("one key source at most; none is no key")
    func sources() throws {
        #expect(try SecretSealer.fromEnvironment([:]) == nil)
        let key = Self.base64Key()
        let fromVariable = try #require(try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY": key]))
        #expect(fromVariable.origin == "LEDGER_SECRET_KEY")
        let both = try #require(throws: SecretError.self) {
            try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY": key, "LEDGER_SECRET_KEY_FILE": "/some/file"])
        }
        #expect(both.message.contains("only one"))
    }

    @Test("a key file others can read is refused with what to do; mode 0600 is taken")
    func keyFileMode() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("secret.key")
        let key = Self.base64Key()
        try Data((key + "\n").utf8).write(to: file)
        chmod(file.path, 0o644)
        let error = try #require(throws: SecretError.self) { try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY_FILE": file.path]) }
        #expect(error.code == .exposedKeyFile)
        #expect(error.message.contains("chmod 600 \(file.path)"))
        #expect(error.message.contains("644"))
        chmod(file.path, 0o640)
        #expect(throws: SecretError.self) { try SecretSealer.load(file: file) }
        chmod(file.path, 0o600)
        let fromFile = try SecretSealer.load(file: file)
        let fromVariable = try #require(try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY": key]))
        #expect(fromFile.keyID == fromVariable.keyID)
    }

    @Test("the key file made on first use is mode 0600 from its creation, and later runs read the same key")
    func keyFileMadeOnFirstUse() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("home/secret.key")
        // Ten processes' worth of first starts at once: one file wins and every one reads it.
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 { group.addTask { try SecretSealer.loadOrCreate(file: file).keyID } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(ids.count == 1)
        #expect(PrivateFile.mode(of: file) == 0o600)
        #expect(try SecretSealer.loadOrCreate(file: file).keyID == ids.first)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)
        #expect(leftovers == ["secret.key"], "no temporary file is left behind")
    }
}

@Suite("Files holding passwords and keys are private from their creation")
struct PrivateFileTests {
    @Test("a written file is mode 0600, also when it replaces a file others could read")
    func writtenPrivate() throws {
        let folder = try SecretSealerTests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("postgres.json")
        try Data("old".utf8).write(to: file)
        chmod(file.path, 0o644)
        try PrivateFile.write(Data("new".utf8), to: file)
        #expect(PrivateFile.mode(of: file) == 0o600)
        #expect(try String(contentsOf: file, encoding: .utf8) == "new")
    }

    @Test("create places a file only where there is none, and leaves what is there untouched")
    func createOnlyOnce() throws {
        let folder = try SecretSealerTests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("secret.key")
        #expect(try PrivateFile.create(Data("first".utf8), at: file))
        #expect(try !PrivateFile.create(Data("second".utf8), at: file))
        #expect(try String(contentsOf: file, encoding: .utf8) == "first")
        #expect(PrivateFile.mode(of: file) == 0o600)
    }
}
