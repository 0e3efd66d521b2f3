import LedgerDomain

/// How the App Store spells environments in `verifyReceipt` answers.
extension StoreEnvironment {
    /// Reads the `environment` key (`Production`, `Sandbox`) or an app receipt's `receipt_type`
    /// (`Production`, `ProductionSandbox`).
    public init?(responseValue: String) {
        switch responseValue.lowercased() {
        case "production", "prod": self = .production
        case "sandbox", "productionsandbox": self = .sandbox
        default: return nil
        }
    }

    /// The spelling the App Store uses in answers.
    public var responseValue: String {
        switch self {
        case .production: "Production"
        case .sandbox: "Sandbox"
        }
    }
}
