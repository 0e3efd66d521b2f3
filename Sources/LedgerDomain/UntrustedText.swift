/// Text a stranger chose (a JWS header's `alg`, a bundle id in a refused payload), made safe to
/// write in a log line or an answer: control characters escaped, so it cannot start a forged line,
/// and cut to `limit` characters, so it cannot fill the log.
public enum UntrustedText {
    public static func quoted(_ text: some StringProtocol, limit: Int = 80) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit {
                out += "…(\(text.unicodeScalars.count - limit) more)"
                break
            }
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            case "'": out += "\\'"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.properties.generalCategory == .lineSeparator
                    || scalar.properties.generalCategory == .paragraphSeparator || scalar.properties.generalCategory == .format {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
            count += 1
        }
        return "'" + out + "'"
    }
}
