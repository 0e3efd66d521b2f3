import AppStore
import Foundation
import LedgerApplication
import LedgerDomain

/// The receipt parser's target, in this process: a mutated `verifyReceipt` answer is read as the
/// verifier reads one (`ReceiptResponseParser.read`), and whatever the parser accepts goes on
/// through what the ledger does next: the receipt decision on a new user's stream, the events in
/// their stored JSON, the fold of those events read back, and the user's entitlements, periods and
/// balances. So an odd value the parser lets through cannot crash a later step unseen.
///
/// Refusals are errors of the declared types (`ReceiptVerificationError`, `DecisionError`,
/// `LedgerInputError`); any other error, or events the fold cannot read back, is a failure. A
/// crash ends the process: run with the case printed first (`ledger-bench fuzz --trace`) to
/// name it.
public struct ReceiptParserFuzz: Sendable {
    public static let target = "receipt-parser"

    let seeds: [FuzzJSON]
    let mutator: JSONMutator
    let catalog: ProductCatalog

    /// - Parameters:
    ///   - answers: real `verifyReceipt` answers (status 0 or 21006) to mutate.
    ///   - products: the catalog the decisions and the fold see.
    public init(answers: [Data], products: [Product]) throws {
        let seeds = answers.compactMap(FuzzJSON.init(data:))
        guard !seeds.isEmpty, seeds.count == answers.count else {
            throw FuzzSetupError("the receipt parser needs verifyReceipt answers that are JSON (\(seeds.count) of \(answers.count) are)")
        }
        self.seeds = seeds
        self.mutator = JSONMutator(donors: seeds)
        self.catalog = ProductCatalog(products: products)
    }

    /// Reads every `*.json` file of `directory` (the App Store fixtures of the tests).
    public static func answers(inDirectory directory: URL) throws -> [Data] {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        return try files.map { try Data(contentsOf: $0) }
    }

    func run(_ index: Int, random: inout FuzzRandom) -> FuzzOutcome {
        let (body, steps) = mutator.mutate(random.pick(seeds), random: &random)
        let environment: StoreEnvironment = random.chance(50) ? .sandbox : .production
        let parser = ReceiptResponseParser(receiptSHA256: AppStoreReceiptVerifier.sha256Hex(body), answeredBy: environment)
        func failure(_ detail: String) -> FuzzOutcome {
            .failed([FuzzFailure(.crash, target: Self.target, caseIndex: index, detail: detail, steps: steps, body: body)])
        }
        let receipt: VerifiedReceipt
        do {
            receipt = try parser.read(body)
        } catch {
            return .refused(error.code.description)
        }
        let decision: ReceiptDecision
        do {
            decision = try UserDecisions.observeReceipt(
                receipt.appStoreAnswer, app: receipt.bundleId, deviceId: "fuzz-device", price: nil, currency: nil,
                digest: AppStoreReceiptVerifier.sha256Hex, on: UserLedger()
            )
        } catch {
            return .refused("decision \(error.code.rawValue)")
        }
        var recorded: [RecordedEvent] = []
        for (offset, pending) in decision.events.enumerated() {
            let event: NewEvent
            do {
                event = try NewEvent(pending: pending, metadata: ["requestId": "fuzz"])
            } catch let error as LedgerInputError {
                return .refused("event \(error.message)")
            } catch {
                return failure("the decision's event \(pending.event) could not be written: \(error)")
            }
            recorded.append(RecordedEvent(
                position: Int64(offset + 1), streamID: "user/\(Self.target)/fuzz", streamVersion: Int64(offset + 1),
                eventID: event.eventID, type: event.type.stored, data: event.data, metadata: event.metadata,
                recordedAt: Date(), deduplicationKey: event.deduplicationKey?.rawValue
            ))
        }
        let state: UserLedger
        do {
            state = try UserLedger(folding: recorded, catalog: catalog)
        } catch {
            return failure("events the decision wrote do not fold back: \(error)")
        }
        let now = Date()
        _ = state.entitlements(catalog: catalog, at: now)
        _ = state.subscriptionPeriods(catalog: catalog)
        _ = state.consumableBalances
        return .accepted
    }
}
