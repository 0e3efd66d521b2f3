/// What one story did and where it left its user.
public struct StoryResult: Sendable {
    public let story: String
    public let userId: String
    public internal(set) var steps: [DemoStep] = []
    /// The user's entitlements, balances and subscription periods after the story, at the App Store's clock.
    public internal(set) var entitlements: DemoJSON = .null
    public internal(set) var balances: DemoJSON = .null
    public internal(set) var periods: DemoJSON = .null
    /// The receipts the story posted, in order, for stories that replay them.
    public internal(set) var receipts: [PostedReceipt] = []

    public struct PostedReceipt: Sendable {
        public let deviceId: String
        public let receipt: String
        public let price: String?
    }

    /// The answer of the step named `name` (the last one, when there are several).
    public subscript(name: String) -> DemoStep? {
        steps.last { $0.name == name }
    }
}
