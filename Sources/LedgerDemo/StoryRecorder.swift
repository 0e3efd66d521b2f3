import Foundation
import NIOHTTP1

/// Runs a story's requests, checks each status, prints each step and keeps the highest log position
/// written, so that later reads pass it as `minPosition` and see the story's own writes.
struct StoryRecorder {
    let client: DemoClient
    let printer: @Sendable (String) -> Void
    var result: StoryResult
    /// The highest `position` a ledger write answered with.
    var position = 0
    private var number = 0
    /// Notifications a step of the story has shown already.
    var seenNotifications: Set<String> = []

    init(story: String, userId: String, headline: String, client: DemoClient, printer: @escaping @Sendable (String) -> Void) {
        self.client = client
        self.printer = printer
        self.result = StoryResult(story: story, userId: userId)
        printer("")
        printer("== \(headline) ==")
    }

    var app: String { client.bundleId }
    var user: String { result.userId }
    /// `/v1/apps/{bundleId}/users/{userId}`.
    var userPath: String { "/v1/apps/\(app)/users/\(user)" }

    /// A request to the ledger; fails unless the status is `expect`.
    @discardableResult
    mutating func ledger(
        _ name: String, _ title: String, _ method: HTTPMethod, _ path: String, _ body: DemoJSON? = nil,
        idempotent: Bool = false, expect: Int = 200
    ) async throws -> DemoAnswer {
        let headers = idempotent ? [("Idempotency-Key", UUID().uuidString)] : []
        let answer = try await client.ledger(method, path, body, headers: headers)
        if method != .GET, let written = answer.body["position"]?.int { position = max(position, written) }
        try record(name, title, "\(method.rawValue) \(path)", body, answer, expect: expect)
        return answer
    }

    /// A request to the simulator's admin API; fails unless the status is `expect`.
    @discardableResult
    mutating func simulator(
        _ name: String, _ title: String, _ method: HTTPMethod, _ path: String, _ body: DemoJSON? = nil, expect: Int = 200
    ) async throws -> DemoAnswer {
        let answer = try await client.simulator(method, path, body)
        try record(name, title, "\(method.rawValue) simulator \(path)", body, answer, expect: expect)
        return answer
    }

    /// Makes the test user in the simulator (an existing one is fine).
    func ensureSimulatorUser() async throws {
        let answer = try await client.simulator(.POST, "/admin/users", ["userId": .string(user)])
        guard answer.status == 201 || answer.status == 409 else {
            throw DemoError(message: "the simulator refused test user \(user): \(answer.status) \(answer.body)")
        }
    }

    /// The simulator's clock, as an ISO 8601 time for `?at=`: entitlements are judged at the App
    /// Store's (accelerated) time, not the wall clock.
    func simulatorNow() async throws -> String {
        let answer = try await client.simulator(.GET, "/admin/clock")
        guard let now = answer.body["now"]?.string else { throw DemoError(message: "the simulator's clock answered \(answer.status) \(answer.body)") }
        return now
    }

    /// Buys in the simulator; returns the transaction and the app receipt.
    mutating func buy(_ name: String, _ title: String, product: String, quantity: Int = 1) async throws -> (transaction: DemoJSON, receipt: String) {
        let answer = try await simulator(name, title, .POST, "/admin/purchases", [
            "userId": .string(user), "bundleId": .string(app), "productId": .string(product), "quantity": .number(Double(quantity)),
        ], expect: 201)
        guard let transaction = answer.body["transaction"], let receipt = answer.body["receipt"]?.string else {
            throw DemoError(message: "the simulator's purchase answer has no transaction and receipt: \(answer.body)")
        }
        return (transaction, receipt)
    }

    /// The user subscribes to `product` on the phone (posted with `price`), the App Store's clock
    /// moves 6 minutes (one sandbox renewal) and the fresh receipt is posted. Returns both receipts.
    mutating func subscribeAndRenewOnce(product: String, price: String) async throws -> (bought: String, renewed: String) {
        let bought = try await buy("buy", "\(user) subscribes to \(product) on the phone (P1M: 5 minutes in the sandbox)", product: product)
        try await ingest("ingest", "The app's server posts the receipt", receipt: bought.receipt, device: "phone", price: price)
        try await simulator("advance", "The App Store's clock moves 6 minutes: one renewal", .POST, "/admin/clock/advance", ["minutes": 6])
        let renewed = try await freshReceipt("receipt", "The app's server fetches the current receipt")
        try await ingest("ingest-renewal", "Posted: the renewal is recorded", receipt: renewed, device: "phone")
        return (bought.receipt, renewed)
    }

    /// The user's current app receipt from the simulator (renewals and refunds up to its clock).
    mutating func freshReceipt(_ name: String, _ title: String) async throws -> String {
        let answer = try await simulator(name, title, .GET, "/admin/users/\(user)/apps/\(app)")
        guard let receipt = answer.body["receipt"]?.string else { throw DemoError(message: "the simulator gave no receipt: \(answer.body)") }
        return receipt
    }

    /// Posts a receipt, as the app's server does after a purchase.
    @discardableResult
    mutating func ingest(_ name: String, _ title: String, receipt: String, device: String, price: String? = nil) async throws -> DemoAnswer {
        var body: [String: DemoJSON] = ["userId": .string(user), "deviceId": .string(device), "receiptData": .string(receipt)]
        if let price {
            body["price"] = .string(price)
            body["currency"] = "USD"
        }
        return try await ledger(name, title, .POST, "/v1/apps/\(app)/receipts", .object(body))
    }

    /// Reads entitlements, balances and periods at the simulator's clock, reflecting every write so far.
    mutating func finish() async throws -> StoryResult {
        let at = try await simulatorNow()
        let query = "minPosition=\(position)&at=\(at)"
        result.entitlements = try await ledger("final-entitlements", "Entitlements now", .GET, "\(userPath)/entitlements?\(query)").body
        result.balances = try await ledger("final-balances", "Balances", .GET, "\(userPath)/balances?minPosition=\(position)").body
        result.periods = try await ledger("final-periods", "Subscription periods", .GET, "\(userPath)/subscriptions?\(query)").body
        printer("   \(user) now:")
        for line in Self.summary(entitlements: result.entitlements, balances: result.balances, periods: result.periods) {
            printer("     " + line)
        }
        return result
    }

    /// Readable lines for a user's state.
    static func summary(entitlements: DemoJSON, balances: DemoJSON, periods: DemoJSON) -> [String] {
        var lines: [String] = []
        for owned in entitlements["owned"]?.array ?? [] {
            lines.append("owns \(owned["productId"]?.string ?? "?") (\(owned["productType"]?.string ?? "?")) since \(owned["ownedSince"]?.string ?? "?")")
        }
        for balance in balances["balances"]?.array ?? [] {
            lines.append("balance of \(balance["productId"]?.string ?? "?"): \(balance["balance"]?.int ?? 0) (bought \(balance["purchased"]?.int ?? 0), used \(balance["consumed"]?.int ?? 0))")
        }
        for subscription in entitlements["subscriptions"]?.array ?? [] {
            let state = subscription["active"]?.bool == true
                ? "active until \(subscription["activeUntil"]?.string ?? "?")" : "inactive (expired \(subscription["expiresAt"]?.string ?? "?"))"
            lines.append("subscription \(subscription["productId"]?.string ?? "?") (\(subscription["kind"]?.string ?? "?")): \(state)")
        }
        for period in periods["periods"]?.array ?? [] {
            lines.append("period \(period["productId"]?.string ?? "?") \(period["start"]?.string ?? "?") → \(period["end"]?.string ?? "?") (transaction \(period["transactionId"]?.string ?? "?"))")
        }
        return lines.isEmpty ? ["nothing"] : lines
    }

    mutating func record(_ name: String, _ title: String, _ request: String, _ body: DemoJSON?, _ answer: DemoAnswer, expect: Int) throws {
        number += 1
        let sent = body.map { " " + Self.abbreviated($0).description } ?? ""
        result.steps.append(DemoStep(name: name, title: title, request: request + sent, status: answer.status, answer: answer.body))
        printer("\(number). \(title)")
        printer("   → \(request)\(sent)")
        printer("   ← \(answer.status) \(Self.shortened(Self.abbreviated(answer.body).description))")
        guard answer.status == expect else {
            throw DemoError(message: "\(result.story): '\(title)' (\(request)) answered \(answer.status), expected \(expect): \(answer.body)")
        }
    }

    /// Receipts and signed payloads are long base64: show their start and length.
    static func abbreviated(_ json: DemoJSON) -> DemoJSON {
        switch json {
        case .object(let members):
            return .object(members.reduce(into: [:]) { result, member in
                if ["receiptData", "receipt", "transactionReceipt", "signedTransaction", "signedPayload", "signedTransactions"].contains(member.key), let text = member.value.string, text.count > 24 {
                    result[member.key] = .string("\(text.prefix(16))…(\(text.count) chars)")
                } else {
                    result[member.key] = abbreviated(member.value)
                }
            })
        case .array(let items):
            return .array(items.map(abbreviated))
        default:
            return json
        }
    }

    private static func shortened(_ text: String) -> String {
        text.count > 600 ? String(text.prefix(600)) + "…" : text
    }
}
