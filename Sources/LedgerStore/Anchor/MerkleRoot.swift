import Crypto
import Foundation

/// The root of a Merkle tree over leaves given one at a time, in memory that grows with the
/// logarithm of their number, so a million stream heads are hashed as they are read.
///
/// The tree has the shape of RFC 6962 (Certificate Transparency): for n leaves, the left subtree
/// holds the largest power of two below n. A node is SHA-256 over a 0x01 byte and its two
/// children; leaves hash with a 0x00 byte first (`StreamHead.leafHash`). The root of no leaves
/// is SHA-256 of nothing.
struct MerkleRoot {
    /// The complete subtrees so far, largest (leftmost) first; their sizes are distinct powers of two.
    private var subtrees: [(size: Int, hash: Data)] = []
    private(set) var leafCount = 0

    mutating func append(leaf: Data) {
        leafCount += 1
        subtrees.append((1, leaf))
        while subtrees.count >= 2, subtrees[subtrees.count - 1].size == subtrees[subtrees.count - 2].size {
            let right = subtrees.removeLast()
            let left = subtrees.removeLast()
            subtrees.append((left.size * 2, Self.node(left.hash, right.hash)))
        }
    }

    /// The root over every leaf appended: the complete subtrees joined from the right.
    var value: Data {
        guard var root = subtrees.last?.hash else { return Data(SHA256.hash(data: Data())) }
        for subtree in subtrees.dropLast().reversed() {
            root = Self.node(subtree.hash, root)
        }
        return root
    }

    private static func node(_ left: Data, _ right: Data) -> Data {
        var hasher = SHA256()
        hasher.update(data: [0x01])
        hasher.update(data: left)
        hasher.update(data: right)
        return Data(hasher.finalize())
    }
}
