import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    /// The simulator's vendor number, in its report file names.
    static let vendorNumber = "85000000"

    /// The columns of Apple's Summary Sales Report (version 1_3's), in Apple's order.
    static let salesReportColumns = [
        "Provider", "Provider Country", "SKU", "Developer", "Title", "Version", "Product Type Identifier", "Units", "Developer Proceeds",
        "Begin Date", "End Date", "Customer Currency", "Country Code", "Currency of Proceeds", "Apple Identifier", "Customer Price",
        "Promo Code", "Parent Identifier", "Subscription", "Period", "Category", "CMB", "Device", "Supported Platforms", "Proceeds Reason",
        "Preserved Pricing", "Client", "Order Type",
    ]

    /// Apple's Summary Sales Report of an app's in-app purchases for one reporting day
    /// (`yyyy-MM-dd`, Pacific Time, as worldwide agreements' reports are), as tab-separated text.
    ///
    /// A line per product, storefront, price and proceeds (and, for subscriptions, new or renewal):
    /// payments the day (free trial periods are not sales), and refunds the day Apple refunded them,
    /// with negative units and customer price and positive proceeds. Proceeds are 70 % of the price,
    /// 85 % for a renewal past a year of service ("Rate After One Year"); the simulator charges no
    /// tax. Family members' copies and restores are not sales; a prorated refund is left out (Apple
    /// does not document how a summary line shows one). Production only: Apple's sandbox has no
    /// sales reports.
    func salesReport(bundleId: String, day: String) throws -> String {
        guard environment == .production else {
            throw SimulatorError.notFound("Apple's sandbox has no sales reports: run a production simulator (--environment production)")
        }
        guard apps[bundleId] != nil else { throw SimulatorError.notFound("no app '\(bundleId)'") }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "America/Los_Angeles")!
        let parts = day.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, let start = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])),
              let end = calendar.date(byAdding: .day, value: 1, to: start)
        else { throw SimulatorError.badRequest("'\(day)' is not a date: use yyyy-MM-dd") }
        let appleDate = String(format: "%02d/%02d/%04d", parts[1], parts[2], parts[0])

        struct Line: Hashable {
            let productId, type, country, currency, price, proceeds: String
            let subscription, period, reason: String
        }
        var units: [Line: Int] = [:]
        for transaction in transactions.values where transaction.bundleId == bundleId && transaction.isPayment && transaction.ownership == .purchased {
            guard let product = product(bundleId: bundleId, productId: transaction.productId),
                  let local = product.price(in: transaction.storefront), let price = Decimal(string: local.price),
                  let country = CountryCodes.alpha2(fromAlpha3: transaction.storefront)
            else { continue }
            let renewal = transaction.productType == .autoRenewable && transaction.transactionId != transaction.originalTransactionId
            let pastAYear = renewal && transaction.purchaseDate.timeIntervalSince(transaction.originalPurchaseDate) >= 365 * 86_400
            let proceeds = Self.rounded(price * (pastAYear ? Decimal(string: "0.85")! : Decimal(string: "0.7")!))
            func line(_ sign: String) -> Line {
                Line(productId: transaction.productId, type: Self.productTypeIdentifier(transaction.productType), country: country,
                     currency: local.currency, price: sign + Self.text(price), proceeds: Self.text(proceeds),
                     subscription: transaction.productType == .autoRenewable ? (renewal ? "Renewal" : "New") : "",
                     period: product.duration.map(Self.periodName) ?? "", reason: pastAYear ? "Rate After One Year" : "")
            }
            if !transaction.isTrialPeriod, transaction.purchaseDate >= start, transaction.purchaseDate < end {
                units[line(""), default: 0] += transaction.quantity
            }
            if transaction.isRefunded, transaction.revocationPercentage == nil, !transaction.isTrialPeriod,
               let refunded = transaction.cancellationDate, refunded >= start, refunded < end {
                units[line("-"), default: 0] -= transaction.quantity
            }
        }
        var text = Self.salesReportColumns.joined(separator: "\t") + "\n"
        for (line, count) in units.sorted(by: { ($0.key.productId, $0.key.country, $0.key.price) < ($1.key.productId, $1.key.country, $1.key.price) }) {
            let fields = [
                "APPLE", "US", line.productId, "Simulated Developer", line.productId, "", line.type, String(count), line.proceeds,
                appleDate, appleDate, line.currency, line.country, line.currency, Self.appleIdentifier(line.productId), line.price,
                "", bundleId, line.subscription, line.period, "", "", "iPhone", "iOS", line.reason, "", "", "",
            ]
            text += fields.joined(separator: "\t") + "\n"
        }
        return text
    }

    static func productTypeIdentifier(_ type: ProductType) -> String {
        switch type {
        case .autoRenewable: "IAY"
        case .nonRenewing: "IA9"
        case .freeSubscription: "IAC"
        default: "IA1"
        }
    }

    static func periodName(_ duration: SubscriptionDuration) -> String {
        switch duration {
        case .sevenDays: "7 Days"
        case .oneMonth: "1 Month"
        case .twoMonths: "2 Months"
        case .threeMonths: "3 Months"
        case .sixMonths: "6 Months"
        case .oneYear: "1 Year"
        }
    }

    /// A product's stable Apple ID: digits from its id's hash.
    static func appleIdentifier(_ productId: String) -> String {
        let digest = SHA256.hash(data: Data(productId.utf8))
        return String(digest.prefix(4).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 9_000_000_000 + 1_000_000_000)
    }

    /// Two places, half up, as money.
    static func rounded(_ value: Decimal) -> Decimal {
        var value = value
        var result = Decimal()
        NSDecimalRound(&result, &value, 2, .plain)
        return result
    }

    static func text(_ value: Decimal) -> String {
        String(format: "%.2f", NSDecimalNumber(decimal: value).doubleValue)
    }
}
