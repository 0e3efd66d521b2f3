import Foundation

/// Decimal text as finance reads it: parsed exactly (never through floating point) and printed
/// without trailing zeros, so that Apple's `0.990` and the ledger's `0.99` are one price.
public enum DecimalText {
    public static func parse(_ text: String?) -> Decimal? {
        guard let text, !text.isEmpty else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    static func format(_ value: Decimal) -> String {
        var value = value
        var rounded = Decimal()
        NSDecimalRound(&rounded, &value, 6, .plain)
        return NSDecimalNumber(decimal: rounded).stringValue
    }

    /// The canonical text of a decimal text; the text itself when it is not a number.
    public static func canonical(_ text: String) -> String {
        parse(text).map(format) ?? text
    }
}
