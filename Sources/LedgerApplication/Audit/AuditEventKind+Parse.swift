import Foundation
import LedgerProjections

extension AuditEventKind {
    /// Kinds from a comma-separated list such as `purchase,refund`; duplicates collapse.
    public static func parse(list text: String, field: String = "type") throws(AuditQueryError) -> [AuditEventKind] {
        var kinds: [AuditEventKind] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = part.trimmingCharacters(in: .whitespaces)
            guard let kind = AuditEventKind(rawValue: name) else {
                throw .invalidFilter(field: field, "'\(name)' is not an audit event type: use purchase, renewal or refund, comma-separated")
            }
            if !kinds.contains(kind) { kinds.append(kind) }
        }
        return kinds
    }
}
