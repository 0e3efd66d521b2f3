import Foundation
import LedgerDomain

/// What the app and support tell the ledger about a user, each a decision on the user's stream
/// (`UserDecisions`): a transaction finished on a device, a purchase that failed, units of a
/// consumable used, non-renewing periods restored to a new device, a revocation by support; and
/// the app's catalog. `commandKey` is a client's idempotency key as the deduplication key of the
/// command's first event (see `UserCommandHandler.execute`).
public struct UserCommands: Sendable {
    let handler: UserCommandHandler

    public init(handler: UserCommandHandler) {
        self.handler = handler
    }

    /// The app finished a transaction on a device; finishing it again records nothing and answers
    /// where the first finish is.
    public func finish(
        transactionId: String, deviceId: String, app: String, metadata: [String: String], commandKey: DeduplicationKey?
    ) async throws -> (position: Int64, duplicate: Bool) {
        let user = try await owner(of: transactionId, app: app)
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata, commandKey: commandKey) { state, _ in
            (try UserDecisions.finish(transactionId: transactionId, deviceId: deviceId, on: state), ())
        }
        var position = outcome.append?.position ?? outcome.state.finishPositions[transactionId] ?? 0
        if position == 0 { position = try await handler.position(of: outcome, app: app, user: user) }
        return (position, outcome.append == nil)
    }

    /// A purchase the App Store did not complete.
    public func recordFailure(
        userId: String, deviceId: String, productId: String, errorCode: String, cancelled: Bool, app: String,
        metadata: [String: String], commandKey: DeduplicationKey?
    ) async throws -> Int64 {
        let outcome = try await handler.execute(app: app, user: userId, metadata: metadata, commandKey: commandKey) { state, _ in
            (try UserDecisions.recordFailure(productId: productId, deviceId: deviceId, errorCode: errorCode, cancelled: cancelled, on: state), ())
        }
        return outcome.append?.position ?? 0
    }

    /// Support takes back what a transaction gave; answers the revocation date recorded (a command
    /// recorded before under its key answers with the date it recorded).
    public func revoke(
        transactionId: String, reason: String, revokedAt: Date, app: String, metadata: [String: String], commandKey: DeduplicationKey?
    ) async throws -> (position: Int64, revokedAt: Date) {
        let user = try await owner(of: transactionId, app: app)
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata, commandKey: commandKey) { state, _ in
            (try UserDecisions.revoke(transactionId: transactionId, revokedAt: revokedAt, reason: reason, on: state), ())
        }
        return (outcome.append?.position ?? 0, outcome.state.transactions[transactionId]?.revokedAt ?? revokedAt)
    }

    /// The app used up units of a consumable; refused beyond the balance. Answers the balance left.
    public func consume(
        productId: String, quantity: Int, deviceId: String, user: String, app: String, metadata: [String: String],
        commandKey: DeduplicationKey?
    ) async throws -> (position: Int64, balance: Int) {
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata, commandKey: commandKey) { state, catalog in
            guard state.version > 0 else { throw ReadError.unknownUser(user) }
            guard catalog[productId] != nil || state.transactionsInOrder.contains(where: { $0.productId == productId }) else {
                throw DecisionError.unknownProduct(productId)
            }
            let events = try UserDecisions.consume(productId: productId, quantity: quantity, deviceId: deviceId, catalog: catalog, on: state)
            return (events, ())
        }
        return (outcome.append?.position ?? 0, outcome.state.balance(of: productId))
    }

    /// What restoring to a device gave: every non-renewing period the user paid for, the
    /// transactions the device received for the first time, and the user's state after it.
    public struct Restore: Sendable {
        public let position: Int64
        public let periods: [SubscriptionPeriod]
        public let restoredTransactionIds: [String]
        public let state: UserLedger
        public let catalog: ProductCatalog
    }

    /// Everything the user owns, for a device, recording which non-renewing periods the device
    /// received (the App Store never restores those).
    public func restore(
        toDevice deviceId: String, user: String, app: String, metadata: [String: String], commandKey: DeduplicationKey?
    ) async throws -> Restore {
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata, commandKey: commandKey) { state, catalog in
            guard state.version > 0 else { throw ReadError.unknownUser(user) }
            let (events, periods) = UserDecisions.restoreNonRenewing(toDevice: deviceId, catalog: catalog, on: state)
            let fresh = events.compactMap { event -> [String]? in
                if case .subscriptionRestoredToDevice(let restored) = event.event { return restored.transactionIds }
                return nil
            }.flatMap { $0 }
            return (events, (periods, fresh))
        }
        let position = try await handler.position(of: outcome, app: app, user: user)
        return Restore(position: position, periods: outcome.value.0, restoredTransactionIds: outcome.value.1, state: outcome.state,
                       catalog: outcome.catalog)
    }

    /// Defines or redefines a product; defined exactly so already, nothing is recorded and the
    /// answer names where that definition is.
    public func defineProduct(_ product: Product, app: String, metadata: [String: String]) async throws -> (changed: Bool, position: Int64) {
        if let result = try await handler.defineProduct(product, app: app, metadata: metadata) { return (true, result.position) }
        return (false, try await handler.reader.definitionPosition(of: product.productId, app: app) ?? 0)
    }

    /// The app reports whether the user consented to Apple being told how they used their
    /// purchases when they ask for a refund (or withdrew consent); recorded when it changes.
    /// Answers the position of the user's latest event and whether this call changed the consent.
    public func recordConsumptionConsent(
        _ consented: Bool, user: String, app: String, metadata: [String: String]
    ) async throws -> (position: Int64, changed: Bool) {
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata) { state, _ in
            (UserDecisions.recordConsumptionConsent(consented, on: state), ())
        }
        if case .appended(let position, _)? = outcome.append?.outcomes.first { return (position, true) }
        return (try await handler.position(of: outcome, app: app, user: user), false)
    }

    /// The app's server binds an `appAccountToken` to the user (a new random one when `token` is
    /// nil): App Store notifications carrying it, whose transaction no user holds, become the
    /// user's. A token is one user's for ever; bound to another user, it is refused. Answers the
    /// token, where the binding is, and whether this call made it.
    public func bindToken(
        _ token: String?, user: String, app: String, metadata: [String: String]
    ) async throws -> (token: String, position: Int64, bound: Bool) {
        let chosen = token ?? UUID().uuidString.lowercased()
        guard let normalized = AppAccountToken.normalized(chosen) else {
            throw DecisionError.invalidInput("appAccountToken '\(chosen.prefix(80))' is not a UUID, which StoreKit requires of it")
        }
        let key = try DeduplicationKey.appAccountToken(app: app, token: normalized)
        if let held = try await handler.store.recorded([key])[key] {
            guard case .user(app, user) = StreamID.kind(of: held.streamID) else { throw DecisionError.tokenBoundToAnotherUser(normalized) }
            return (normalized, held.position, false)
        }
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata) { state, _ in
            (try UserDecisions.bindToken(normalized, app: app, on: state), ())
        }
        for result in outcome.append?.outcomes ?? [] {
            switch result {
            case .appended(let position, _): return (normalized, position, true)
            case .duplicate(let stored):
                // Another user's binding won the race.
                guard case .user(app, user) = StreamID.kind(of: stored.streamID) else { throw DecisionError.tokenBoundToAnotherUser(normalized) }
                return (normalized, stored.position, false)
            }
        }
        return (normalized, try await handler.position(of: outcome, app: app, user: user), false)
    }

    /// The user an App Store transaction of the app is recorded for.
    public func owner(of transactionID: String, app: String) async throws -> String {
        let keys = StoreEnvironment.allCases.flatMap { DeduplicationKey.claimsOf(transactionID: transactionID, app: app, environment: $0) }
        guard let stream = try await handler.store.recorded(keys).values.first?.streamID,
              case .user(app, let user) = StreamID.kind(of: stream)
        else {
            throw DecisionError.unrecordedTransaction(transactionID, app: app)
        }
        return user
    }
}
