extension LedgerJSON {
    /// Appends `text` as a JSON string, escaped as Foundation's encoder escapes it: quote,
    /// backslash and control characters (slashes and non-ASCII left as they are). For JSON
    /// written by hand where it must match the encoder's bytes.
    public static func appendQuoted(_ text: String, to output: inout String) {
        output += "\""
        // Most strings (ids, product names, timestamps) need no escape: appended whole.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            output += text
            output += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
