import LedgerDomain

/// What an audit trail row records: money taken (purchase, renewal) or given back (refund).
public enum AuditEventKind: String, Sendable, Codable, Hashable, CaseIterable {
    case purchase
    case renewal
    case upgrade
    case crossgrade
    case refund

    /// The row a payment gives.
    public init(_ kind: UserLedger.Transaction.Kind) {
        switch kind {
        case .purchase, .restore: self = .purchase
        case .renewal: self = .renewal
        case .upgrade: self = .upgrade
        case .crossgrade: self = .crossgrade
        }
    }

    /// Which way money moved: finance adds what was taken and subtracts what was given back.
    public enum MoneyDirection: Sendable, Hashable {
        case taken
        case givenBack
    }

    public var moneyDirection: MoneyDirection {
        switch self {
        case .purchase, .renewal, .upgrade, .crossgrade: .taken
        case .refund: .givenBack
        }
    }

    /// The stored names of the kinds whose money moved in `direction`, for SQL filters.
    public static func stored(_ direction: MoneyDirection) -> [String] {
        allCases.filter { $0.moneyDirection == direction }.map(\.rawValue)
    }
}
