import NIOHTTP1

/// An HTTP answer: its status and its body as JSON.
public struct DemoAnswer: Sendable {
    public let status: Int
    public let body: DemoJSON
    public let headers: HTTPHeaders

    /// The `error.code` of an error answer.
    public var errorCode: String? { body["error"]?["code"]?.string }
}
