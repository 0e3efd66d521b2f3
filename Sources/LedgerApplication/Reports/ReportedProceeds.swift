import Foundation
import LedgerDomain

/// Apple's per-unit proceeds as its latest report of each day gives them, for the audit trail's
/// rows: a fold of the app's `reports/<bundle id>` stream kept in memory and brought up to date
/// from the last version it read, so that a page of the trail costs one short read of the stream,
/// not the whole of it.
public actor ReportedProceeds {
    /// What a report line prices: a product sold (or refunded) in a country at a customer price.
    struct Line: Hashable {
        let sku: String
        /// ISO 3166-1 alpha-2.
        let country: String
        let currency: String
        /// Per unit, canonical decimal text, without the sign refunds carry.
        let price: String
        let refund: Bool
    }

    /// The proceeds of one unit of a line.
    struct Rate: Hashable {
        let perUnit: Decimal
        let currency: String
        /// Apple's `Rate After One Year`: the reduced commission of a subscriber's second year.
        let afterOneYear: Bool
    }

    typealias Day = [Line: [Rate]]

    private struct Fold {
        var version: Int64 = 0
        var days: [String: Day] = [:]
    }

    private let store: any EventStore
    private var folds: [String: Fold] = [:]

    public init(store: any EventStore) {
        self.store = store
    }

    /// The app's reported days, by `yyyy-MM-dd`, each from the latest report of that day.
    func days(app: String) async throws -> [String: Day] {
        let stream = try StreamID.reports(app: app)
        while true {
            let from = (folds[app]?.version ?? 0) + 1
            let page = try await store.readStream(stream, fromVersion: from, limit: 200)
            var fold = folds[app] ?? Fold()
            // Another call may have read the same events while this one waited.
            for event in page where event.streamVersion > fold.version {
                if event.type == SalesReportReceived.typeName.stored {
                    let report = try LedgerJSON.decode(SalesReportReceived.self, from: event.data)
                    fold.days[report.reportDate] = Self.index(report.lines)
                }
                fold.version = event.streamVersion
            }
            folds[app] = fold
            if page.count < 200 { return fold.days }
        }
    }

    static func index(_ lines: [SalesReportLine]) -> Day {
        var day: Day = [:]
        for line in lines {
            guard let units = Int(line.units), units != 0, let price = DecimalText.parse(line.customerPrice),
                  let perUnit = DecimalText.parse(line.developerProceeds)
            else { continue }
            let key = Line(sku: line.sku, country: line.countryCode, currency: line.customerCurrency,
                           price: DecimalText.format(price < 0 ? -price : price), refund: units < 0)
            let rate = Rate(perUnit: perUnit < 0 ? -perUnit : perUnit, currency: line.proceedsCurrency,
                            afterOneYear: line.proceedsReason?.localizedCaseInsensitiveContains("after one year") == true)
            if day[key]?.contains(rate) != true { day[key, default: []].append(rate) }
        }
        return day
    }
}
