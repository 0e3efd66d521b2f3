import Foundation
@testable import LedgerStore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The anchor signing key lives in a file only its owner can read")
struct AnchorSigningKeyTests {
    /// A directory of the test's own, removed afterwards.
    static func withDirectory<Result>(_ body: (URL) throws -> Result) throws -> Result {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-anchor-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    private func mode(of path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try #require(attributes[.posixPermissions] as? Int)
    }

    @Test("a new key is written with mode 0600 and its public key beside it, and reads back the same")
    func createdPrivate() throws {
        try Self.withDirectory { directory in
            let path = directory.appendingPathComponent("anchor.key").path
            let created = try AnchorSigningKey.create(at: path)
            #expect(try mode(of: path) == 0o600)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
            #expect(try AnchorSigningKey.load(from: path).publicKey == created.publicKey)
            #expect(try AnchorPublicKey.load(from: path + ".pub") == created.publicKey)
        }
    }

    @Test("an existing key file is never overwritten")
    func neverOverwritten() throws {
        try Self.withDirectory { directory in
            let path = directory.appendingPathComponent("anchor.key").path
            let first = try AnchorSigningKey.create(at: path)
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            try FileManager.default.removeItem(atPath: path + ".pub")
            #expect(throws: LogAnchorError.self) { try AnchorSigningKey.create(at: path) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
            #expect(!FileManager.default.fileExists(atPath: path + ".pub"), "no public key of another private key is left")
            #expect(try AnchorSigningKey.load(from: path).publicKey == first.publicKey)
        }
    }

    @Test("a key file other users can read, or write, is refused with the command that fixes it")
    func readableByOthersRefused() throws {
        try Self.withDirectory { directory in
            let path = directory.appendingPathComponent("anchor.key").path
            _ = try AnchorSigningKey.create(at: path)
            for mode: mode_t in [0o644, 0o640, 0o604, 0o620] {
                chmod(path, mode)
                let error = try #require(throws: LogAnchorError.self) { try AnchorSigningKey.load(from: path) }
                #expect(error.code == .unsafeKeyFile)
                #expect(error.message.contains("mode 0\(String(mode, radix: 8))") && error.message.contains("chmod 600 \(path)"), "\(error.message)")
            }
            chmod(path, 0o400)
            #expect(throws: Never.self) { try AnchorSigningKey.load(from: path) }
        }
    }

    @Test("a key made by openssl is read; a file that is not an Ed25519 key is refused by name")
    func opensslAndGarbage() throws {
        try Self.withDirectory { directory in
            // `openssl genpkey -algorithm ed25519` of RFC 8032's first test key: PKCS #8 in PEM.
            let openssl = """
                -----BEGIN PRIVATE KEY-----
                MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g
                -----END PRIVATE KEY-----

                """
            let path = directory.appendingPathComponent("openssl.key").path
            try AnchorFiles.createNew(at: path, mode: 0o600, contents: Data(openssl.utf8))
            let key = try AnchorSigningKey.load(from: path)
            #expect(key.publicKey.rawRepresentation == Hex.decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", count: 32))

            let garbage = directory.appendingPathComponent("garbage.key").path
            try AnchorFiles.createNew(at: garbage, mode: 0o600, contents: Data("not a key\n".utf8))
            let error = try #require(throws: LogAnchorError.self) { try AnchorSigningKey.load(from: garbage) }
            #expect(error.code == .keyFile && error.message.contains(garbage))
        }
    }
}
