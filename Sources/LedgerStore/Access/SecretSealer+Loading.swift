import Crypto
import Foundation
import LedgerApplication

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SecretSealer {
    /// The key of `LEDGER_SECRET_KEY` (32 bytes in base64) or of the file `LEDGER_SECRET_KEY_FILE`
    /// names; nil when neither is set. Setting both is refused: one of them would be ignored.
    public static func fromEnvironment(_ environment: [String: String]) throws(SecretError) -> SecretSealer? {
        let text = environment["LEDGER_SECRET_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        let path = environment["LEDGER_SECRET_KEY_FILE"].flatMap { $0.isEmpty ? nil : $0 }
        switch (text, path) {
        case (nil, nil):
            return nil
        case (.some, .some):
            throw .invalidKey("LEDGER_SECRET_KEY and LEDGER_SECRET_KEY_FILE", "both are set; set only one")
        case (let text?, nil):
            return try SecretSealer(key: decode(text, origin: "LEDGER_SECRET_KEY"), origin: "LEDGER_SECRET_KEY")
        case (nil, let path?):
            return try load(file: URL(fileURLWithPath: path))
        }
    }

    /// A new random key as `LEDGER_SECRET_KEY` and key files hold it (base64).
    public static func generateKeyText() -> String {
        generateKey().withUnsafeBytes { Data($0) }.base64EncodedString()
    }

    /// The key in `file` (base64 text), refused when the file can be read by its group or others.
    public static func load(file: URL) throws(SecretError) -> SecretSealer {
        let origin = "the key file \(file.path)"
        let descriptor = openForReading(file.path)
        guard descriptor >= 0 else {
            throw .invalidKey(origin, "it cannot be opened (\(String(cString: strerror(errno))))")
        }
        defer { close(descriptor) }
        // The mode of the file opened, not of whatever the name points at a moment later.
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw .invalidKey(origin, "its mode cannot be read (\(String(cString: strerror(errno))))")
        }
        guard info.st_mode & 0o170000 == 0o100000 else { throw .invalidKey(origin, "it is not a regular file") }
        guard info.st_mode & 0o077 == 0 else { throw .exposedKeyFile(file.path, mode: UInt32(info.st_mode & 0o7777)) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = read(descriptor, &bytes, bytes.count)
        guard count >= 0 else { throw .invalidKey(origin, "it cannot be read (\(String(cString: strerror(errno))))") }
        let text = String(decoding: bytes.prefix(count), as: UTF8.self)
        return try SecretSealer(key: decode(text, origin: origin), origin: file.path)
    }

    /// The key in `file`, made first (a new random key, mode 0600 from creation) when there is none.
    /// Safe when several processes start at once: one file wins, and all read it.
    public static func loadOrCreate(file: URL) throws(SecretError) -> SecretSealer {
        if !FileManager.default.fileExists(atPath: file.path) {
            let key = generateKeyText() + "\n"
            do {
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                _ = try PrivateFile.create(Data(key.utf8), at: file)
            } catch {
                throw .invalidKey("the key file \(file.path)", "it cannot be created (\(error))")
            }
        }
        return try load(file: file)
    }

    /// 32 bytes from base64 text; the text itself is never repeated in an error.
    private static func decode(_ text: String, origin: String) throws(SecretError) -> SymmetricKey {
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw .invalidKey(origin, "it is not base64")
        }
        guard data.count == 32 else { throw .invalidKey(origin, "it decodes to \(data.count) bytes, not 32") }
        return SymmetricKey(data: data)
    }
}

/// open(2) for reading, which `SecretSealer.open` would shadow inside the type.
private func openForReading(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_CLOEXEC)
}
