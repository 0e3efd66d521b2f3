import Crypto
import Foundation
import LedgerDomain

/// Finance closes a month: its audit figures frozen as a signed fact in the log, its rows kept, and
/// whatever the ledger learns later that would change them listed as adjustments naming their cause.
/// Called alike by `ledger audit close|reopen|periods|adjustments` and the `/v1/audit/periods` routes.
public struct ClosePeriods: Sendable {
    let store: any EventStore
    let periods: any PeriodStore
    let proceeds: AuditProceeds
    let directory: any AppDirectory

    public init(store: any EventStore, periods: any PeriodStore, proceeds: AuditProceeds, directory: any AppDirectory) {
        self.store = store
        self.periods = periods
        self.proceeds = proceeds
        self.directory = directory
    }

    // MARK: Closing and reopening

    /// Closes `period` (`yyyy-MM`) of `app` in `timeZone`: refused while it has not ended, and
    /// while it is closed (reopen it first).
    public func close(app: String, period: String, timeZone: String = "UTC", closedBy: String, signer: any PeriodSigner,
                      now: Date = Date()) async throws -> PeriodStatus {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        let (from, to) = try Self.bounds(of: period, timeZone: timeZone)
        guard to <= now else {
            throw PeriodError(.periodNotEnded, "\(period) has not ended yet in \(timeZone) (it ends at \(LedgerJSON.formatTimestamp(to))): a period is closed once it is over")
        }
        let (history, version) = try await read(app: app)
        if let current = Self.status(of: period, in: history), current.state == .closed {
            throw PeriodError(.periodClosed, "\(period) was closed at \(LedgerJSON.formatTimestamp(current.closedAt)) by \(current.closedBy) (log position \(current.factPosition)): reopen it first (`ledger audit reopen`)")
        }
        let closeId = UUID()
        let kept = try await periods.keepRows(app: app, closeId: closeId, from: from, to: to)
        let parts = try await periods.keptParts(closeId: closeId)
        let rows = try await proceeds.summarize(parts, app: app)
        let figures = rows.map { row in
            PeriodClosed.Figure(
                environment: row.environment ?? .production, currency: row.currency, productId: row.productId ?? "", purchases: row.purchases,
                units: row.units, gross: row.gross, refunds: row.refunds, refundedUnits: row.refundedUnits, refundedAmount: row.refundedAmount,
                net: row.net, unpriced: row.unpriced, proceeds: row.proceeds, refundedProceeds: row.refundedProceeds, netProceeds: row.netProceeds,
                proceedsCurrency: row.proceedsCurrency, proceedsSource: row.proceedsSource.rawValue, proceedsUnknown: row.proceedsUnknown
            )
        }
        let unsigned = PeriodClosed(period: period, timeZone: timeZone, from: from, to: to, closeId: closeId, position: kept.position,
                                    auditTrailVersion: kept.auditTrailVersion, rows: kept.rows, rowsChecksum: kept.checksum, figures: figures,
                                    closedBy: closedBy, publicKey: signer.publicKeyPEM, signature: "")
        let signature = try signer.sign(try unsigned.signedContent).base64EncodedString()
        let fact = PeriodClosed(period: period, timeZone: timeZone, from: from, to: to, closeId: closeId, position: kept.position,
                                auditTrailVersion: kept.auditTrailVersion, rows: kept.rows, rowsChecksum: kept.checksum, figures: figures,
                                closedBy: closedBy, publicKey: signer.publicKeyPEM, signature: signature)
        let event = try NewEvent(fact, deduplicationKey: try DeduplicationKey(rawValue: "period-close/\(app)/\(closeId.uuidString.lowercased())"))
        // Another close or reopening of this app's periods since the read: decided again by the caller.
        _ = try await store.append([event], to: try StreamID.periods(app: app), expecting: version == 0 ? .noStream : .exactly(version))
        guard let status = Self.status(of: period, in: try await read(app: app).history) else {
            throw StoreError.integrity("the close of \(period) was recorded but cannot be read back")
        }
        return status
    }

    /// Reopens a closed period, saying why; the close stays in the log.
    public func reopen(app: String, period: String, reason: String, reopenedBy: String) async throws -> PeriodStatus {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        _ = try Self.bounds(of: period, timeZone: "UTC")
        let why = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !why.isEmpty else { throw AccessError.invalidInput("say why the period is reopened (--reason): the reason stays in the log") }
        let (history, version) = try await read(app: app)
        guard let current = Self.status(of: period, in: history), current.state == .closed else {
            throw PeriodError(.periodNotClosed, "\(period) is not closed: nothing to reopen")
        }
        let event = try NewEvent(PeriodReopened(period: period, closeId: current.closeId, reason: why, reopenedBy: reopenedBy))
        _ = try await store.append([event], to: try StreamID.periods(app: app), expecting: .exactly(version))
        return try Self.status(of: period, in: try await read(app: app).history) ?? current
    }

    // MARK: Reading

    /// Every period of the app ever closed, by period.
    public func statuses(app: String) async throws -> [PeriodStatus] {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        let history = try await read(app: app).history
        return Set(history.map(\.period)).sorted().compactMap { Self.status(of: $0, in: history) }
    }

    /// The period's standing; nil when it was never closed.
    public func status(app: String, period: String) async throws -> PeriodStatus? {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        _ = try Self.bounds(of: period, timeZone: "UTC")
        return Self.status(of: period, in: try await read(app: app).history)
    }

    /// The adjustments to a closed period: each row of it the audit trail now has otherwise than
    /// the close kept, booked in the first period open when the ledger learned of it.
    public func adjustments(app: String, period: String) async throws -> [PeriodAdjustment] {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        _ = try Self.bounds(of: period, timeZone: "UTC")
        let history = try await read(app: app).history
        guard let status = Self.status(of: period, in: history),
              let closedVersion = history.last(where: { $0.closeId == status.closeId && $0.closed != nil })?.auditTrailVersion
        else {
            throw PeriodError(.periodNeverClosed, "\(period) was never closed: its figures are the audit trail's, with nothing to adjust")
        }
        let changed = try await periods.changedRows(app: app, closeId: status.closeId, from: status.from, to: status.to, after: status.closePosition)
        let fold = try await periods.auditTrailVersion()
        return changed.map { row in
            let cause: PeriodAdjustment.Cause
            // A row a fact recorded after the close brought is that fact's, whatever fold reads it;
            // otherwise a newer fold than the close's is the cause, else the latest fact about the row.
            let ownFact = row.cause.map { $0.position == row.position && row.kept == nil } ?? false
            if !ownFact, fold.version != closedVersion || row.cause == nil {
                cause = .init(kind: .replay, position: nil, type: nil, stream: nil, recordedAt: fold.createdAt,
                              message: fold.version != closedVersion
                                  ? "the audit trail was rebuilt by its fold v\(fold.version) (the close read v\(closedVersion)): a replay after a fix"
                                  : "no fact was recorded after the close for this row: the audit trail's fold sees it otherwise (a replay)")
            } else {
                let fact = row.cause!
                let own = fact.position == row.position && row.kept == nil
                cause = .init(kind: .fact, position: fact.position, type: fact.type, stream: fact.stream, recordedAt: fact.recordedAt,
                              message: own ? "\(fact.type) recorded at log position \(fact.position) on \(LedgerJSON.formatTimestamp(fact.recordedAt)), after the close"
                                  : "\(fact.type) recorded after the close (log position \(fact.position), \(LedgerJSON.formatTimestamp(fact.recordedAt))) changed how the ledger sees this row")
            }
            let learned = cause.recordedAt ?? Date()
            let values = row.now ?? row.kept!
            let before = DecimalText.parse(row.kept?.amount) ?? 0
            let after = DecimalText.parse(row.now?.amount) ?? 0
            let refund = row.event == "refund"
            return PeriodAdjustment(
                closedPeriod: period, bookedIn: Self.bookedPeriod(learned: learned, closed: status, history: history),
                kind: row.kept == nil ? .added : row.now == nil ? .removed : .changed, position: row.position, event: row.event,
                userId: row.userId, transactionId: row.transactionId, environment: values.environment, productId: values.productId,
                currency: values.currency, quantityBefore: row.kept?.quantity, quantityAfter: row.now?.quantity, amountBefore: row.kept?.amount,
                amountAfter: row.now?.amount, netChange: DecimalText.format(refund ? before - after : after - before), cause: cause
            )
        }
    }

    // MARK: The stream

    struct Entry {
        let period: String
        let closeId: UUID
        let closed: PeriodClosed?
        let reopened: PeriodReopened?
        let position: Int64
        let recordedAt: Date
        var auditTrailVersion: Int? { closed?.auditTrailVersion }
    }

    private func read(app: String) async throws -> (history: [Entry], version: Int64) {
        let stream = try StreamID.periods(app: app)
        var entries: [Entry] = []
        var next: Int64 = 1
        var version: Int64 = 0
        while true {
            let page = try await store.readStream(stream, fromVersion: next, limit: 500)
            for event in page {
                version = event.streamVersion
                if event.type == PeriodClosed.typeName.stored {
                    let closed = try LedgerJSON.decode(PeriodClosed.self, from: event.data)
                    entries.append(Entry(period: closed.period, closeId: closed.closeId, closed: closed, reopened: nil, position: event.position,
                                         recordedAt: event.recordedAt))
                } else if event.type == PeriodReopened.typeName.stored {
                    let reopened = try LedgerJSON.decode(PeriodReopened.self, from: event.data)
                    entries.append(Entry(period: reopened.period, closeId: reopened.closeId, closed: nil, reopened: reopened, position: event.position,
                                         recordedAt: event.recordedAt))
                }
            }
            guard page.count == 500, let last = page.last else { return (entries, version) }
            next = last.streamVersion + 1
        }
    }

    static func status(of period: String, in history: [Entry]) -> PeriodStatus? {
        let entries = history.filter { $0.period == period }
        guard let lastClose = entries.last(where: { $0.closed != nil }), let closed = lastClose.closed else { return nil }
        let reopened = entries.last.map { $0.reopened != nil && $0.closeId == closed.closeId } ?? false
        let lines = entries.map { entry in
            if let closed = entry.closed {
                return "closed at \(LedgerJSON.formatTimestamp(entry.recordedAt)) by \(closed.closedBy) (log position \(entry.position), figures at position \(closed.position))"
            }
            return "reopened at \(LedgerJSON.formatTimestamp(entry.recordedAt)) by \(entry.reopened!.reopenedBy): \(entry.reopened!.reason)"
        }
        return PeriodStatus(
            period: period, state: reopened ? .reopened : .closed, closeId: closed.closeId, closePosition: closed.position,
            closedAt: lastClose.recordedAt, closedBy: closed.closedBy, timeZone: closed.timeZone, from: closed.from, to: closed.to,
            factPosition: lastClose.position, signatureValid: verify(closed), publicKey: closed.publicKey, figures: closed.figures, history: lines
        )
    }

    /// Whether a close's signature is its public key's over its content.
    public static func verify(_ closed: PeriodClosed) -> Bool {
        let body = closed.publicKey.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Data(base64Encoded: body), der.count >= 32,
              let key = try? Curve25519.Signing.PublicKey(rawRepresentation: der.suffix(32)),
              let signature = Data(base64Encoded: closed.signature), let content = try? closed.signedContent
        else { return false }
        return key.isValidSignature(signature, for: content)
    }

    /// The first period open when the ledger learned of a change: the month it learned it in,
    /// but never the closed period or one closed before then.
    static func bookedPeriod(learned: Date, closed: PeriodStatus, history: [Entry]) -> String {
        var candidate = (try? month(of: learned, timeZone: closed.timeZone)) ?? closed.period
        if candidate <= closed.period { candidate = next(closed.period) }
        // A period closed before the change was learned cannot take it either.
        let closedThen = Set(history.filter { $0.closed != nil && $0.recordedAt <= learned }.map(\.period))
        while closedThen.contains(candidate) { candidate = next(candidate) }
        return candidate
    }

    // MARK: Periods

    /// The instants that bound a month `yyyy-MM` in a time zone.
    public static func bounds(of period: String, timeZone identifier: String) throws -> (from: Date, to: Date) {
        guard let zone = TimeZone(identifier: identifier) else {
            throw AccessError.invalidInput("time zone '\(identifier)' is not an IANA name such as UTC or Europe/Paris")
        }
        let parts = period.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 4, parts[1].count == 2, let year = Int(parts[0]), let month = Int(parts[1]), (1...12).contains(month)
        else { throw AccessError.invalidInput("period '\(period)' is not a month: use yyyy-MM, e.g. 2026-11") }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        guard let from = calendar.date(from: DateComponents(year: year, month: month, day: 1)),
              let to = calendar.date(byAdding: .month, value: 1, to: from)
        else { throw AccessError.invalidInput("period '\(period)' cannot be placed in \(identifier)") }
        return (from, to)
    }

    public static func month(of date: Date, timeZone identifier: String) throws -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: identifier) ?? TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month], from: date)
        return String(format: "%04d-%02d", parts.year!, parts.month!)
    }

    static func next(_ period: String) -> String {
        let parts = period.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 2 else { return period }
        return parts[1] == 12 ? String(format: "%04d-01", parts[0] + 1) : String(format: "%04d-%02d", parts[0], parts[1] + 1)
    }
}
