import Crypto
import Foundation
@testable import LedgerStore
import Testing

@Suite("The Merkle root over stream heads")
struct MerkleRootTests {
    /// RFC 6962's definition, recursively over the whole list: the reference the streaming
    /// computation must agree with.
    private func reference(_ leaves: ArraySlice<Data>) -> Data {
        if leaves.isEmpty { return Data(SHA256.hash(data: Data())) }
        if leaves.count == 1 { return leaves.first! }
        var split = 1
        while split * 2 < leaves.count { split *= 2 }
        let left = reference(leaves.prefix(split))
        let right = reference(leaves.dropFirst(split))
        return Data(SHA256.hash(data: Data([0x01]) + left + right))
    }

    private func leaves(_ count: Int) -> [Data] {
        (0..<count).map { StreamHead(streamID: "user/app/\($0)", version: Int64($0 + 1), hash: Data(SHA256.hash(data: Data("\($0)".utf8)))).leafHash }
    }

    @Test("streaming the heads gives RFC 6962's root for every count from 0 to 70")
    func streamingEqualsDefinition() {
        for count in 0...70 {
            let all = leaves(count)
            var root = MerkleRoot()
            for leaf in all { root.append(leaf: leaf) }
            #expect(root.value == reference(all[...]), "\(count) leaves")
            #expect(root.leafCount == count)
        }
    }

    @Test("any change to one head, or to the order of two, changes the root")
    func everyHeadCounts() {
        let heads = (0..<9).map { StreamHead(streamID: "user/app/\($0)", version: 3, hash: Data(repeating: UInt8($0), count: 32)) }
        func root(_ heads: [StreamHead]) -> Data {
            var root = MerkleRoot()
            for head in heads { root.append(leaf: head.leafHash) }
            return root.value
        }
        let original = root(heads)
        var seen: Set<Data> = [original]
        for index in heads.indices {
            var changed = heads
            changed[index] = StreamHead(streamID: heads[index].streamID, version: 2, hash: heads[index].hash)
            seen.insert(root(changed))
            changed = heads
            var hash = heads[index].hash
            hash[0] ^= 1
            changed[index] = StreamHead(streamID: heads[index].streamID, version: 3, hash: hash)
            seen.insert(root(changed))
            changed = heads
            changed.remove(at: index)
            seen.insert(root(changed))
        }
        var swapped = heads
        swapped.swapAt(3, 4)
        seen.insert(root(swapped))
        #expect(seen.count == 1 + heads.count * 3 + 1, "every variant has a root of its own")
    }

    @Test("heads are ordered by their UTF-8 bytes, as PostgreSQL's COLLATE \"C\" orders them")
    func byteOrder() {
        let precomposed = "user/app/caf\u{E9}"
        let decomposed = "user/app/cafe\u{301}"
        #expect(precomposed == decomposed, "Swift calls them equal")
        #expect(!StreamHead.same(precomposed, decomposed), "the log has two streams")
        #expect(StreamHead.precedes(decomposed, precomposed), "'e' (0x65) sorts before 0xC3")
        #expect(StreamHead.precedes("user/a", "user/a/b"))
        #expect(!StreamHead.precedes("user/b", "user/a/b"))
        #expect(!StreamHead.precedes("user/a", "user/a"))
    }
}
