import Foundation

/// A signed record of every stream's head and of the log's head at one moment, checked.
///
/// An anchor kept outside the database lets `ledger audit verify` see what the hash chains alone
/// cannot: a stream whose last events were removed, a stream removed whole, and a stream whose
/// events were rewritten with their hashes recomputed. A value of this type exists only once its
/// signature and its Merkle root have been checked (`load(from:trusting:)`).
public struct LogAnchor: Sendable {
    /// Which key the signature was checked against.
    public enum Trust: Sendable, Hashable {
        /// The key the verifier was given: the anchor was made with that key.
        case trustedKey
        /// Only the key the anchor carries: the file is intact as signed, but anyone could have
        /// made it with a key of their own.
        case embeddedKeyOnly
    }

    public let summary: LogAnchorSummary
    public let signature: Data
    /// Every stream's head, in stream-id order (UTF-8 bytes), one per stream.
    public let heads: [StreamHead]
    public let trust: Trust

    init(summary: LogAnchorSummary, signature: Data, heads: [StreamHead], trust: Trust) {
        self.summary = summary
        self.signature = signature
        self.heads = heads
        self.trust = trust
    }

    /// Reads the anchor at `path` and checks it: its signature against `trusted` (or, when nil,
    /// against the key it carries) and its heads against the signed Merkle root.
    public static func load(from path: String, trusting trusted: AnchorPublicKey?) throws(LogAnchorError) -> LogAnchor {
        guard FileManager.default.fileExists(atPath: path) else {
            throw .malformedAnchor(path, "there is no such file")
        }
        let contents: Data
        do {
            contents = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .malformedAnchor(path, "it cannot be read (\(error.localizedDescription))")
        }
        let file = try LogAnchorFile(decoding: contents, path: path)

        if let trusted, trusted != file.summary.publicKey {
            throw .untrustedKey(path, signedBy: file.summary.publicKey.fingerprint, trusted: trusted.fingerprint)
        }
        guard file.summary.publicKey.isValidSignature(file.signature, for: file.summary.signedBytes) else {
            throw .tamperedAnchor(path, "its signature does not match its summary (time, log head, counts or Merkle root)")
        }
        var root = MerkleRoot()
        for head in file.heads {
            root.append(leaf: head.leafHash)
        }
        guard root.value == file.summary.merkleRoot else {
            throw .tamperedAnchor(path, "its list of stream heads does not give the signed Merkle root")
        }
        return LogAnchor(summary: file.summary, signature: file.signature, heads: file.heads, trust: trusted == nil ? .embeddedKeyOnly : .trustedKey)
    }

    /// Where `streamID` is in `heads`, if the anchor has it.
    func index(of streamID: String) -> Int? {
        var low = 0
        var high = heads.count
        while low < high {
            let middle = (low + high) / 2
            if StreamHead.precedes(heads[middle].streamID, streamID) {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low < heads.count && StreamHead.same(heads[low].streamID, streamID) ? low : nil
    }
}
