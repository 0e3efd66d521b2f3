import Foundation

/// What Apple sent for one post, kept as it came: the receipt (or signed payload) as posted and
/// the App Store's answer to it (or what the signed payload decoded to). Content-addressed: the
/// same receipt and answer are kept once, and a fact names them by their hashes.
public struct AppStoreDocument: Sendable, Hashable {
    public let app: String
    public let receiptHash: String
    public let receiptData: String
    public let answerHash: String
    public let environment: String
    public let status: Int
    public let answeredAt: Date
    /// The answer as JSON.
    public let answer: Data

    public init(app: String, receiptHash: String, receiptData: String, answerHash: String, environment: String,
                status: Int, answeredAt: Date, answer: Data) {
        self.app = app
        self.receiptHash = receiptHash
        self.receiptData = receiptData
        self.answerHash = answerHash
        self.environment = environment
        self.status = status
        self.answeredAt = answeredAt
        self.answer = answer
    }
}
