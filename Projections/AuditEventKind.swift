/// What an audit trail row records: money taken (purchase, renewal) or given back (refund).
public enum AuditEventKind: String, Sendable, Codable, Hashable, CaseIterable {
    case purchase
    case renewal
    case refund

    /// Which way money moved: finance adds what was taken and subtracts what was given back.
    public enum MoneyDirection: Sendable, Hashable {
        case taken
        case givenBack
    }

    public var moneyDirection: MoneyDirection {
        switch self {
        case .purchase, .renewal: .taken
        case .refund: .givenBack
        }
    }

    /// The stored names of the kinds whose money moved in `direction`, for SQL filters.
    public static func stored(_ direction: MoneyDirection) -> [String] {
        allCases.filter { $0.moneyDirection == direction }.map(\.rawValue)
    }
}
