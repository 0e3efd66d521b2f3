/// Which App Store a transaction came from. Sandbox money is never revenue.
public enum StoreEnvironment: String, Codable, Sendable, Hashable, CaseIterable {
    case production
    case sandbox
}
