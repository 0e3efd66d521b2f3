/// URLs as they may be shown: in logs, error messages and answers.
public enum URLRedaction {
    /// The text with the password of any `scheme://user:password@host` form replaced by `****`.
    ///
    /// Works on the text, not on a parsed URL, so that a URL too broken to parse (an unencoded
    /// space, `@` or `/` in the password) is masked all the same. Everything from the first `:`
    /// after the user name up to the last `@` is masked: a path or query holding an `@` masks a
    /// little more than the password, never less.
    public static func masked(_ text: String) -> String {
        var afterScheme = text.startIndex
        if let colon = text.firstIndex(of: ":"), text[text.index(after: colon)...].hasPrefix("//") {
            afterScheme = text.index(colon, offsetBy: 3)
        }
        guard let at = text[afterScheme...].lastIndex(of: "@"),
              let colon = text[afterScheme..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<text.index(after: colon)]) + "****" + String(text[at...])
    }
}
