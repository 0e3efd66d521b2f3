import Foundation

/// Arithmetic on money as the ledger writes it: decimal text ("0.99", "120", "-4.5"), never a
/// float. Results are exact where the operation allows it and trimmed of trailing zeros.
public enum Money {
    /// `unitPrice` × `quantity`: the whole amount of several units bought at one price.
    public static func times(_ unitPrice: String, _ quantity: Int) -> String? {
        decimal(unitPrice).map { text($0 * Decimal(quantity)) }
    }

    /// `amount` ÷ `quantity`: the price of one unit of a whole amount, to six decimal places at
    /// most (exact for every amount Apple writes in milliunits and a quantity that divides it).
    public static func unitPrice(of amount: String, quantity: Int) -> String? {
        guard quantity > 0, let value = decimal(amount) else { return nil }
        return text(rounded(value / Decimal(quantity), scale: 6))
    }

    /// The share of `amount` that Apple's `revocationPercentage` names (milliunits of a percent:
    /// 100000 is all of it, 40000 is 40 %), rounded to the currency's minor unit (two decimals but
    /// for the currencies ISO 4217 gives none or three).
    public static func share(of amount: String, milliPercent: Int, currency: String?) -> String? {
        guard let value = decimal(amount) else { return nil }
        let share = value * Decimal(min(max(milliPercent, 0), 100_000)) / Decimal(100_000)
        return text(rounded(share, scale: minorUnits(of: currency)))
    }

    /// Whole units of a quantity that Apple's `revocationPercentage` covers, to the nearest unit
    /// (a refund of one of three items is written 33333: one unit).
    public static func units(of quantity: Int, milliPercent: Int) -> Int {
        let exact = Decimal(quantity) * Decimal(min(max(milliPercent, 0), 100_000)) / Decimal(100_000)
        return NSDecimalNumber(decimal: rounded(exact, scale: 0)).intValue
    }

    /// Decimal places of a currency's minor unit (ISO 4217): two unless the currency has none
    /// (JPY, KRW, …) or three (BHD, KWD, …).
    public static func minorUnits(of currency: String?) -> Int {
        guard let currency else { return 2 }
        if noMinorUnit.contains(currency) { return 0 }
        if threeDecimalPlaces.contains(currency) { return 3 }
        return 2
    }

    private static let noMinorUnit: Set<String> = [
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF",
    ]
    private static let threeDecimalPlaces: Set<String> = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"]

    static func decimal(_ text: String) -> Decimal? {
        guard Product.isDecimal(text) || (text.hasPrefix("-") && Product.isDecimal(String(text.dropFirst()))) else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    static func rounded(_ value: Decimal, scale: Int) -> Decimal {
        var input = value
        var output = Decimal()
        NSDecimalRound(&output, &input, scale, .plain)
        return output
    }

    /// Decimal text without trailing zeros, never in exponent form.
    static func text(_ value: Decimal) -> String {
        let plain = NSDecimalNumber(decimal: value).description(withLocale: Locale(identifier: "en_US_POSIX"))
        return plain == "-0" ? "0" : plain
    }
}
