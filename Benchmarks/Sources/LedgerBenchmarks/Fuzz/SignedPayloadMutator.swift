import AppStoreSimulator
import Foundation
import LedgerDomain
import X509

/// Mutates App Store JWS (signed transactions, notifications) the ways an attacker would: the
/// payload changed and signed again by the trusted test authority (its meaning fuzzed, the
/// signature valid), or the header's `x5c` chain changed (entries dropped, repeated, reordered,
/// look-alike intermediates added, junk, a certificate too long), its `alg` changed, the signature
/// or the compact form broken. The chain and signature mutations keep the rest as it was, so the
/// signature no longer holds: every one of them must be refused, at once, recording nothing.
struct SignedPayloadMutator: Sendable {
    let authority: SimulatorCertificateAuthority
    /// A stranger's chain of look-alike intermediates (see `SimulatorCertificateAuthority.lookAlikes`).
    let lookAlikes: [String]
    let payloads: JSONMutator

    init(authority: SimulatorCertificateAuthority, payloadSeeds: [FuzzJSON]) throws {
        self.authority = authority
        let stranger = try SimulatorCertificateAuthority.lookAlikes(count: 8)
        let signed = try stranger.authority.sign(Data("{}".utf8), chain: stranger.chain)
        lookAlikes = Self.x5c(of: signed) ?? []
        payloads = JSONMutator(donors: payloadSeeds)
    }

    /// A mutation of `jws` and the steps that made it.
    func mutate(_ jws: String, random: inout FuzzRandom) -> (jws: String, steps: [String]) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]), let header = Base64URL.decode(parts[0]),
              var headerObject = (try? JSONSerialization.jsonObject(with: header)) as? [String: Any]
        else { return (jws, ["the seed is not a JWS"]) }
        switch random.next() % 10 {
        case 0, 1, 2, 3:
            // The meaning: the payload mutated, signed again by the trusted authority.
            guard let seed = FuzzJSON(data: payload) else { return (jws, ["the payload is not JSON"]) }
            let (body, steps) = payloads.mutate(seed, random: &random)
            guard let resigned = try? authority.sign(body) else { return (jws, steps + ["signing failed"]) }
            return (resigned, ["payload re-signed: " + steps.joined(separator: "; ")])
        case 4, 5, 6:
            var x5c = headerObject["x5c"] as? [String] ?? []
            let step: String
            switch random.next() % 9 {
            case 0:
                x5c = Array(x5c.dropLast())
                step = "x5c: the root dropped"
            case 1:
                x5c = Array(x5c.dropFirst())
                step = "x5c: the leaf dropped"
            case 2:
                x5c += x5c
                step = "x5c: repeated"
            case 3:
                x5c.reverse()
                step = "x5c: reversed"
            case 4:
                let count = 1 + Int(random.next() % UInt64(max(lookAlikes.count - 1, 1)))
                x5c.insert(contentsOf: lookAlikes.dropFirst().prefix(count), at: min(1, x5c.count))
                step = "x5c: \(count) look-alike intermediates inserted"
            case 5:
                x5c = lookAlikes.isEmpty ? x5c : lookAlikes
                step = "x5c: a stranger's look-alike chain"
            case 6:
                if !x5c.isEmpty { x5c[Int(random.next() % UInt64(x5c.count))] = random.pick(["", "not base64!", "AAAA", "////"]) }
                step = "x5c: an entry replaced by junk"
            case 7:
                x5c.append(String(repeating: "A", count: 12_000))
                step = "x5c: a 12 KB entry"
            default:
                headerObject["x5c"] = random.pick([[], "MII", 42, NSNull()] as [Any])
                step = "x5c: not a list of certificates"
            }
            if !step.hasPrefix("x5c: not") { headerObject["x5c"] = x5c }
            return (Self.jws(headerObject, parts[1], parts[2]), [step])
        case 7:
            headerObject["alg"] = random.pick(["none", "HS256", "RS256", "", "ES256\n2026-01-01 critical forged", String(repeating: "E", count: 5_000)])
            return (Self.jws(headerObject, parts[1], parts[2]), ["alg: \(String(describing: headerObject["alg"]!).prefix(30).debugDescription)"])
        case 8:
            var signature = Base64URL.decode(parts[2]).map { [UInt8]($0) } ?? []
            if !signature.isEmpty, random.chance(70) {
                let index = Int(random.next() % UInt64(signature.count))
                signature[index] ^= UInt8(1 + random.next() % 255)
                return (parts[0] + "." + parts[1] + "." + Base64URL.encode(Data(signature)), ["signature: a byte flipped"])
            }
            return (parts[0] + "." + parts[1] + ".", ["signature: empty"])
        default:
            let broken = random.pick([
                parts[0] + "." + parts[1], jws + ".x", parts[0] + ".." + parts[2], jws.replacingOccurrences(of: "-", with: "+"),
                Base64URL.encode(Data("{\"alg\":\"ES256\"}".utf8)) + "." + parts[1] + "." + parts[2],
            ])
            return (broken, ["compact form broken"])
        }
    }

    static func jws(_ header: [String: Any], _ payload: String, _ signature: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])) ?? Data()
        return Base64URL.encode(data) + "." + payload + "." + signature
    }

    static func x5c(of jws: String) -> [String]? {
        guard let header = jws.split(separator: ".").first.flatMap({ Base64URL.decode($0) }),
              let object = (try? JSONSerialization.jsonObject(with: header)) as? [String: Any]
        else { return nil }
        return object["x5c"] as? [String]
    }
}
