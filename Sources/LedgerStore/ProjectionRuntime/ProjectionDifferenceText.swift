/// A dry run's differences as an engineer reads them: one line per row that changes, naming the
/// app, the user and the transaction, then one line per column that changes (before → after), or
/// the whole row when it appears or disappears.
extension ProjectionRebuilder.Difference {
    public var lines: [String] {
        let row = after ?? before ?? [:]
        let transaction = (row["transaction_id"] ?? nil).map { " transaction \($0)" } ?? ""
        var lines = ["\(change.rawValue) \(app)/\(user)\(transaction) (\(Self.describe(key)))"]
        if let before, let after {
            for column in before.keys.sorted() where before[column] != after[column] {
                lines.append("    \(column): \(Self.value(before[column])) -> \(Self.value(after[column]))")
            }
        } else {
            lines.append("    \(Self.describe(row))")
        }
        return lines
    }

    static func value(_ value: String??) -> String {
        (value ?? nil).map { "'\($0)'" } ?? "NULL"
    }

    static func describe(_ values: [String: String?]) -> String {
        values.keys.sorted().map { "\($0)=\(value(values[$0]))" }.joined(separator: " ")
    }
}
