import Foundation

/// A migration file cut into single statements.
///
/// postgres-nio speaks only the extended query protocol, which takes one statement at a time, so
/// a script is split on the semicolons that end statements: not those inside quotes, quoted
/// identifiers, dollar-quoted bodies (`$$ ... $$`, `$fn$ ... $fn$`) or comments.
struct SQLScript: Sendable {
    let statements: [String]

    init(_ text: String) {
        var statements: [String] = []
        var current = ""
        let characters = Array(text)
        var index = 0

        func flush() {
            let statement = current.trimmingCharacters(in: .whitespacesAndNewlines)
            if !Self.isOnlyComments(statement) { statements.append(statement) }
            current = ""
        }

        while index < characters.count {
            let character = characters[index]
            let next: Character? = index + 1 < characters.count ? characters[index + 1] : nil
            switch character {
            case "-" where next == "-":
                while index < characters.count, characters[index] != "\n" {
                    current.append(characters[index])
                    index += 1
                }
                continue
            case "/" where next == "*":
                var depth = 0
                repeat {
                    if characters[index] == "/", index + 1 < characters.count, characters[index + 1] == "*" {
                        depth += 1
                        current.append("/*")
                        index += 2
                    } else if characters[index] == "*", index + 1 < characters.count, characters[index + 1] == "/" {
                        depth -= 1
                        current.append("*/")
                        index += 2
                    } else {
                        current.append(characters[index])
                        index += 1
                    }
                } while depth > 0 && index < characters.count
                continue
            case "'", "\"":
                current.append(character)
                index += 1
                while index < characters.count {
                    current.append(characters[index])
                    if characters[index] == character {
                        // A doubled quote is an escaped quote, not the end.
                        if index + 1 < characters.count, characters[index + 1] == character {
                            current.append(character)
                            index += 2
                            continue
                        }
                        index += 1
                        break
                    }
                    index += 1
                }
                continue
            case "$":
                if let tag = Self.dollarTag(characters, at: index) {
                    current.append(contentsOf: tag)
                    index += tag.count
                    while index < characters.count {
                        if characters[index] == "$", Self.matches(characters, at: index, tag) {
                            current.append(contentsOf: tag)
                            index += tag.count
                            break
                        }
                        current.append(characters[index])
                        index += 1
                    }
                    continue
                }
            case ";":
                flush()
                index += 1
                continue
            default:
                break
            }
            current.append(character)
            index += 1
        }
        flush()
        self.statements = statements
    }

    /// `$$` or `$tag$` starting at `index`, if one does.
    private static func dollarTag(_ characters: [Character], at index: Int) -> [Character]? {
        var end = index + 1
        while end < characters.count, characters[end] == "_" || characters[end].isLetter || (end > index + 1 && characters[end].isNumber) {
            end += 1
        }
        guard end < characters.count, characters[end] == "$" else { return nil }
        return Array(characters[index...end])
    }

    private static func matches(_ characters: [Character], at index: Int, _ tag: [Character]) -> Bool {
        index + tag.count <= characters.count && Array(characters[index..<index + tag.count]) == tag
    }

    private static func isOnlyComments(_ statement: String) -> Bool {
        statement.split(separator: "\n").allSatisfy {
            let line = $0.trimmingCharacters(in: .whitespaces)
            return line.isEmpty || line.hasPrefix("--")
        }
    }
}
