import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import LedgerDomain
import NIOHTTP1

/// The HTTP API's targets: every route that takes a JSON body, sent through the real server over
/// the real database, one case at a time so that the log can be compared before and after each.
///
/// A case's body is a mutated valid body of its route; sometimes its `Content-Type` is wrong or
/// missing, and the commands that take an `Idempotency-Key` get none, a new one, one shared with
/// earlier cases (a replay, or another body under the key) or a malformed one. Every answer must
/// be below 500 and, when it refuses, a JSON error with a code and a message; after a refusal the
/// log's last position and the receipts and answers kept must be as they were. The
/// `appstore-answers` target sends a valid body to the ledger whose App Store answers a mutated
/// `verifyReceipt` answer: there a 503 that says the answer could not be read is the designed
/// refusal (nothing recorded, retry later), and only there.
public struct LedgerAPIFuzz: Sendable {
    /// A route and the valid bodies its cases start from.
    struct Route: Sendable {
        let target: String
        let method: HTTPMethod
        let seeds: [FuzzJSON]
        let mutator: JSONMutator
        /// Takes an `Idempotency-Key`.
        let isCommand: Bool
        /// The path of case `index`.
        let path: @Sendable (Int) -> String

        init(_ target: String, _ method: HTTPMethod = .POST, isCommand: Bool = true, seeds: [FuzzJSON], path: @escaping @Sendable (Int) -> String) {
            self.target = target
            self.method = method
            self.seeds = seeds
            self.mutator = JSONMutator(donors: seeds)
            self.isCommand = isCommand
            self.path = path
        }
    }

    public static let answersTarget = "appstore-answers"
    /// StoreKit 2 transactions (`POST …/transactions`) and Apple's notifications (the keyless
    /// webhook), their JWS mutated by `SignedPayloadMutator`; every case must also be answered in
    /// `signedDeadline` (a chain that makes a path search explode would not be).
    public static let signedTransactionsTarget = "signed-transactions"
    public static let notificationsTarget = "notifications"
    public static let signedDeadline: Duration = .seconds(5)

    let world: LedgerFuzzWorld
    let seed: UInt64
    let routes: [Route]
    /// Mutated by the `appstore-answers` cases, with `bundle_id` set to the fuzzed app.
    let answerSeeds: [FuzzJSON]
    let answerMutator: JSONMutator
    /// Signed transactions of the world's users, and Apple's notifications about them.
    let signedTransactions: [(user: String, jws: String)]
    let notifications: [String]
    let signedMutator: SignedPayloadMutator

    /// The targets' names, in the order the fuzzer takes turns over them.
    public var targets: [String] { routes.map(\.target) + [Self.answersTarget, Self.signedTransactionsTarget, Self.notificationsTarget] }

    /// - Parameter answers: `verifyReceipt` answers for the `appstore-answers` target, besides the simulator's.
    public init(world: LedgerFuzzWorld, seed: UInt64, answers: [Data]) throws {
        self.world = world
        self.seed = seed
        let app = LedgerFuzzWorld.app
        let users = LedgerFuzzWorld.users
        let receipts = world.receipts
        let transactions = world.transactions
        guard !receipts.isEmpty, !transactions.isEmpty else { throw FuzzSetupError("the world has no receipts or transactions to fuzz with") }
        func text(_ value: String) -> FuzzJSON { .string(value) }

        var receiptSeeds: [FuzzJSON] = []
        for (user, receipt) in receipts {
            receiptSeeds.append(.keyed(["userId": text(user), "deviceId": text("\(user)-phone"), "receiptData": text(receipt)]))
            receiptSeeds.append(.keyed([
                "userId": text(user), "deviceId": text("\(user)-tablet"), "receiptData": text(receipt), "price": text("0.99"), "currency": text("USD"),
            ]))
        }
        let finishSeeds = users.map { FuzzJSON.keyed(["deviceId": text("\($0)-phone")]) }
        let failureSeeds = users.flatMap { user in
            [FuzzJSON.keyed(["userId": text(user), "deviceId": text("\(user)-phone"), "productId": text("coins"),
                             "errorCode": text("SKErrorPaymentCancelled"), "cancelled": .bool(true)]),
             .keyed(["userId": text(user), "deviceId": text("\(user)-phone"), "productId": text("monthly"),
                     "errorCode": text("SKErrorPaymentInvalid"), "cancelled": .bool(false)])]
        }
        let revokeSeeds: [FuzzJSON] = [
            .keyed(["reason": text("support refund"), "revokedAt": text("2026-01-31T12:00:00.000Z")]),
            .keyed(["reason": text("fraud")]),
        ]
        let consumptionSeeds = users.map { FuzzJSON.keyed(["productId": text("coins"), "quantity": .number("1"), "deviceId": text("\($0)-phone")]) }
        let productSeeds: [FuzzJSON] = [
            .keyed(["type": text("consumable"), "referenceName": text("Coins"), "prices": .keyed(["USD": text("0.99"), "EUR": text("1.09")])]),
            .keyed(["type": text("non_consumable"), "prices": .keyed(["USD": text("2.99")])]),
            .keyed(["type": text("auto_renewable"), "duration": text("P1M"), "group": text("premium"), "referenceName": text("Monthly"),
                    "prices": .keyed(["USD": text("4.99"), "JPY": text("600")])]),
            .keyed(["type": text("non_renewing"), "duration": text("P1Y"), "group": text("season")]),
            .keyed(["type": text("free_subscription")]),
        ]
        // Paths pick their transaction, user or product by the case's index, so a case names the same one again.
        routes = [
            Route("receipts", isCommand: false, seeds: receiptSeeds) { _ in "/v1/apps/\(app)/receipts" },
            Route("finish", seeds: finishSeeds) { "/v1/apps/\(app)/transactions/\(transactions[$0 % transactions.count].transactionId)/finish" },
            Route("failures", seeds: failureSeeds) { _ in "/v1/apps/\(app)/failures" },
            Route("revoke", seeds: revokeSeeds) { "/v1/apps/\(app)/transactions/\(transactions[$0 % transactions.count].transactionId)/revoke" },
            Route("consumptions", seeds: consumptionSeeds) { "/v1/apps/\(app)/users/\(users[$0 % users.count])/consumptions" },
            Route("restore", seeds: [.keyed([:]), .keyed(["deviceId": text("ignored")])]) {
                "/v1/apps/\(app)/users/\(users[$0 % users.count])/devices/fuzz-device-\($0 % 7)/restore"
            },
            Route("products", .PUT, isCommand: false, seeds: productSeeds) { "/v1/apps/\(app)/products/fuzz-product-\($0 % 16)" },
        ]

        let answerSeeds = (world.simulatorAnswers + answers).compactMap(FuzzJSON.init(data:)).map { Self.naming(app, in: $0) }
        guard !answerSeeds.isEmpty else { throw FuzzSetupError("no verifyReceipt answers to mutate") }
        self.answerSeeds = answerSeeds
        self.answerMutator = JSONMutator(donors: answerSeeds)

        signedTransactions = world.signedTransactions
        guard !signedTransactions.isEmpty else { throw FuzzSetupError("the world has no signed transactions to fuzz with") }
        let signer = SimulatorSignedPayloads(authority: world.authority)
        var notifications: [String] = []
        for (index, transaction) in signedTransactions.enumerated() {
            let type = ["ONE_TIME_CHARGE", "REFUND", "DID_RENEW", "CONSUMPTION_REQUEST", "SUBSCRIBED"][index % 5]
            notifications.append(try signer.sign(SimulatorSignedPayloads.notification(
                type: type, uuid: "fuzz-seed-\(index)", bundleId: app, environment: .sandbox, signedTransactionInfo: transaction.jws,
                consumptionRequestReason: type == "CONSUMPTION_REQUEST" ? "UNINTENDED_PURCHASE" : nil, signedDate: Date()
            )))
        }
        notifications.append(try signer.sign([
            "notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED", "notificationUUID": "fuzz-seed-token", "version": "2.0",
            "signedDate": Date().milliseconds,
            "externalPurchaseToken": ["externalPurchaseId": "SANDBOX_fuzz", "tokenCreationDate": Date().milliseconds, "appAppleId": 1, "bundleId": app],
        ]))
        self.notifications = notifications
        let payloadSeeds = (signedTransactions.map(\.jws) + notifications).compactMap { jws in
            jws.split(separator: ".").dropFirst().first.flatMap { Base64URL.decode($0) }.flatMap(FuzzJSON.init(data:))
        }
        signedMutator = try SignedPayloadMutator(authority: world.authority, payloadSeeds: payloadSeeds)
    }

    /// The answer with its receipt's `bundle_id` (or old receipts' `bid`) set to `app`, so that
    /// the ledger takes it for the app's receipt.
    static func naming(_ app: String, in answer: FuzzJSON) -> FuzzJSON {
        guard case .object(var members) = answer, let index = members.firstIndex(where: { $0.key == "receipt" }),
              case .object(var receipt) = members[index].value
        else { return answer }
        for position in receipt.indices where ["bundle_id", "bid"].contains(receipt[position].key) {
            receipt[position].value = .string(app)
        }
        members[index].value = .object(receipt)
        return .object(members)
    }

    // MARK: One case

    /// Runs case `index` of `target`. `before` is the log as the previous case left it; the log
    /// as this one leaves it comes back with the outcome (one query per case: nothing else writes).
    func run(
        _ target: String, index: Int, random: inout FuzzRandom, before: LedgerFuzzWorld.LogSnapshot
    ) async throws -> (FuzzOutcome, LedgerFuzzWorld.LogSnapshot) {
        var headers = [("Authorization", "Bearer \(world.key)")]
        let base: String
        let path: String
        let body: Data
        let steps: [String]
        let isCommand: Bool
        if target == Self.signedTransactionsTarget || target == Self.notificationsTarget {
            let isTransaction = target == Self.signedTransactionsTarget
            let seed = isTransaction ? random.pick(signedTransactions) : (user: random.pick(LedgerFuzzWorld.users), jws: random.pick(notifications))
            let (jws, jwsSteps) = signedMutator.mutate(seed.jws, random: &random)
            base = world.ledgerBase
            path = "/v1/apps/\(LedgerFuzzWorld.app)/" + (isTransaction ? "transactions" : "notifications")
            body = (isTransaction
                ? FuzzJSON.keyed(["userId": .string(seed.user), "deviceId": .string("\(seed.user)-fuzz"), "signedTransaction": .string(jws)])
                : FuzzJSON.keyed(["signedPayload": .string(jws)])).data
            steps = jwsSteps
            isCommand = false
            if !isTransaction { headers = [] }
        } else if target == Self.answersTarget {
            let (answer, answerSteps) = answerMutator.mutate(random.pick(answerSeeds), random: &random)
            await world.scripted.script(answer)
            base = world.scriptedLedgerBase
            path = "/v1/apps/\(LedgerFuzzWorld.app)/receipts"
            // A receipt of its own per case (so its answer is kept anew when accepted), and a user per 50 cases.
            let receipt = Data("fuzz-\(seed)-\(index)".utf8).base64EncodedString()
            body = FuzzJSON.keyed(["userId": .string("answers-\(index / 50)"), "deviceId": .string("fuzz-device"), "receiptData": .string(receipt)]).data
            steps = ["App Store answer: " + answerSteps.joined(separator: "; "), "answer: " + String(decoding: answer.prefix(300), as: UTF8.self)]
            isCommand = false
        } else {
            guard let route = routes.first(where: { $0.target == target }) else { throw FuzzSetupError("no route for target \(target)") }
            (body, steps) = route.mutator.mutate(random.pick(route.seeds), random: &random)
            base = world.ledgerBase
            path = route.path(index)
            isCommand = route.isCommand
        }
        var caseSteps = steps
        if random.chance(85) {
            headers.append(("Content-Type", "application/json"))
        } else if let type = random.pick(["text/plain", "", "application/x-www-form-urlencoded", "application/json; charset=utf-16", nil] as [String?]) {
            headers.append(("Content-Type", type))
            caseSteps.append("Content-Type: \(type.debugDescription)")
        } else {
            caseSteps.append("no Content-Type")
        }
        if isCommand, random.chance(40) {
            let key = random.pick([
                "fuzz-\(seed)-\(index)", "fuzz-\(seed)-\(index)", "fuzz-shared-\(index % 4)", "fuzz-shared-\(index % 4)",
                "", " ", String(repeating: "k", count: 256), "a b", "ключ",
            ])
            headers.append(("Idempotency-Key", key))
            caseSteps.append("Idempotency-Key: \(key.prefix(20).debugDescription)")
        }
        let method = routes.first(where: { $0.target == target })?.method ?? .POST
        let send = { try await LedgerFuzzWorld.exchange(world.http, method, base + path, headers: headers, body: body) }
        let started = ContinuousClock.now
        var (outcome, after) = try await check(target, index: index, steps: caseSteps, body: body, before: before, send)
        let took = ContinuousClock.now - started
        if [Self.signedTransactionsTarget, Self.notificationsTarget].contains(target), took > Self.signedDeadline {
            let tries = try await Self.timedAgain(first: took) {
                let started = ContinuousClock.now
                _ = try await send()
                return ContinuousClock.now - started
            }
            let again = try await world.snapshot()
            if again != after {
                let twice = FuzzFailure(.recordedTwice, target: target, caseIndex: index,
                                        detail: "sent again, it recorded more: \(after) then \(again)", steps: caseSteps, body: body)
                if case .failed(let found) = outcome { outcome = .failed(found + [twice]) } else { outcome = .failed([twice]) }
                after = again
            }
            if tries.allSatisfy({ $0 > Self.signedDeadline }) {
                let times = tries.map { "\($0)" }.joined(separator: ", ")
                let slow = FuzzFailure(.slow, target: target, caseIndex: index,
                                       detail: "answered past \(Self.signedDeadline) each of \(tries.count) times: \(times)",
                                       steps: caseSteps, body: body)
                if case .failed(let found) = outcome { outcome = .failed(found + [slow]) } else { outcome = .failed([slow]) }
            }
        }
        return (outcome, after)
    }

    /// A signed case answered past its deadline is sent again, twice at most, until one try is
    /// answered in time: a chain that is costly to check is slow every time, a pause of a busy
    /// machine is not. The case was checked on its first answer; sent again, a recorded payload is
    /// a duplicate and a refused one is refused again, which the caller checks on the log.
    /// `timed` sends the case once more and says how long its answer took. Returns the time of
    /// each try, the first one's included.
    public static func timedAgain(
        first: Duration, deadline: Duration = signedDeadline, _ timed: () async throws -> Duration
    ) async throws -> [Duration] {
        var tries = [first]
        while tries.count < 3, tries.allSatisfy({ $0 > deadline }) {
            tries.append(try await timed())
        }
        return tries
    }

    /// Sends the case and checks the properties.
    private func check(
        _ target: String, index: Int, steps: [String], body: Data, before: LedgerFuzzWorld.LogSnapshot,
        _ send: () async throws -> LedgerFuzzWorld.Answer
    ) async throws -> (FuzzOutcome, LedgerFuzzWorld.LogSnapshot) {
        func failure(_ kind: FuzzFailure.Kind, _ detail: String) -> FuzzFailure {
            FuzzFailure(kind, target: target, caseIndex: index, detail: detail, steps: steps, body: body)
        }
        let answer: LedgerFuzzWorld.Answer
        do {
            answer = try await send()
        } catch {
            return (.failed([failure(.crash, "no answer: \(error)")]), try await world.snapshot())
        }
        let after = try await world.snapshot()
        var failures: [FuzzFailure] = []
        let error = answer.json?["error"] as? [String: Any]
        let code = error?["code"] as? String
        let message = error?["message"] as? String
        let designedUnavailable = target == Self.answersTarget && answer.status == 503
            && ["appstore_bad_response", "appstore_unavailable"].contains(code ?? "")
        if answer.status >= 500, !designedUnavailable {
            failures.append(failure(.serverError, "HTTP \(answer.status): \(answer.text)"))
        }
        if answer.status >= 400, code?.isEmpty ?? true || message?.isEmpty ?? true {
            failures.append(failure(.unexplained, "HTTP \(answer.status) without a JSON error code and message: \(answer.text)"))
        } else if answer.status < 400, answer.status != 304, answer.json == nil {
            failures.append(failure(.unexplained, "HTTP \(answer.status) whose body is not a JSON object: \(answer.text)"))
        }
        if answer.status >= 400, after != before {
            failures.append(failure(.recordedOnRefusal, "HTTP \(answer.status) \(code ?? "?") yet the log went from \(before) to \(after)"))
        }
        if !failures.isEmpty { return (.failed(failures), after) }
        return (answer.status >= 400 ? .refused("\(answer.status) \(code ?? "")") : .accepted, after)
    }
}
