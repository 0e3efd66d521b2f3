import Foundation
import LedgerApplication
import Synchronization

/// API keys this server accepted, by the SHA-256 of their bearer token, so that a caller's next
/// request is authenticated without a query; and the apps' shared secrets it read, so that a
/// receipt's verification does not read the secret again.
///
/// Only kept while `ChangeFeed` listens: every revocation (any change of `ledger.api_keys` but an
/// insert) and every change of an app (`ledger.apps`, migration 0017) is announced to it, and it
/// forgets them all at once. A key checked against the
/// database while a revocation arrives is not kept (`ticket`): the answer it was checked with may
/// predate the revocation. When the feed stops listening (a lost connection), the keys are
/// forgotten and every request asks the database again until it listens again.
public final class AcceptedKeys: Sendable {
    private struct State {
        var listening = false
        /// Grows whenever the kept keys are forgotten.
        var epoch: UInt64 = 0
        /// The last `api_keys` generation the feed saw.
        var generation: Int64 = 0
        var keys: [Data: APIKey] = [:]
        /// Each app's shared secret as read (nil: the app has none).
        var secrets: [String: String?] = [:]

        mutating func forget() {
            epoch &+= 1
            keys.removeAll()
            secrets.removeAll()
        }
    }

    private let state = Mutex(State())
    let capacity: Int

    public init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// Whether keys are kept now (the feed listens).
    public var isListening: Bool { state.withLock { $0.listening } }

    /// How many keys are kept.
    public var count: Int { state.withLock { $0.keys.count } }

    /// The key this token was accepted as, when it is kept.
    func key(for tokenHash: Data) -> APIKey? {
        state.withLock { $0.listening ? $0.keys[tokenHash] : nil }
    }

    /// A ticket to keep a key about to be checked against the database; nil when nothing is kept.
    func ticket() -> UInt64? {
        state.withLock { $0.listening ? $0.epoch : nil }
    }

    /// Keeps a key the database accepted, unless the keys were forgotten since `ticket` was taken.
    func keep(_ key: APIKey, for tokenHash: Data, ticket: UInt64) {
        state.withLock { state in
            guard state.listening, state.epoch == ticket else { return }
            if state.keys.count >= capacity { state.keys.removeAll(keepingCapacity: true) }
            state.keys[tokenHash] = key
        }
    }

    /// The app's shared secret, when it is kept: `.some(nil)` for an app known to have none.
    func secret(of app: String) -> String?? {
        state.withLock { $0.listening ? $0.secrets[app] : nil }
    }

    /// Keeps an app's shared secret as the database gave it, unless everything was forgotten
    /// since `ticket` was taken.
    func keep(secret: String?, of app: String, ticket: UInt64) {
        state.withLock { state in
            guard state.listening, state.epoch == ticket else { return }
            if state.secrets.count >= capacity { state.secrets.removeAll(keepingCapacity: true) }
            state.secrets[app] = .some(secret)
        }
    }

    /// A key was revoked or removed, or an app changed (announced with `generation`): forget every
    /// kept key and secret.
    func revoked(generation: Int64) {
        state.withLock { state in
            state.forget()
            state.generation = max(state.generation, generation)
        }
    }

    /// The feed listens, and the keys' generation is `generation`: keys may be kept from now on.
    /// A generation other than the last one seen means revocations were missed: forget the keys.
    func listening(generation: Int64) {
        state.withLock { state in
            if generation != state.generation {
                state.forget()
                state.generation = generation
            }
            state.listening = true
        }
    }

    /// The feed stopped listening: forget the keys and keep none until it listens again.
    func deaf() {
        state.withLock { state in
            state.listening = false
            state.forget()
        }
    }
}
