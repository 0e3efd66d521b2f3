import LedgerDomain

/// Which App Store's rows an audit query reads.
///
/// Production is the default: sandbox (TestFlight, App Review, developers) money is never revenue.
/// Sandbox is read only when asked, and `all` only when asked too; totals over `all` are then
/// always broken down by environment, never added together.
public enum AuditEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    case production
    case sandbox
    case all

    /// The one environment this reads, or nil for `all`.
    public var only: StoreEnvironment? {
        switch self {
        case .production: .production
        case .sandbox: .sandbox
        case .all: nil
        }
    }
}
