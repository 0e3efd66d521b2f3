/// One request of a story: what was sent, to whom, and what came back.
public struct DemoStep: Sendable {
    /// A short key tests look the step up by, such as `overdraw`.
    public let name: String
    /// What the step does, in words.
    public let title: String
    /// Method, URL and body as sent (a receipt abbreviated).
    public let request: String
    public let status: Int
    public let answer: DemoJSON
}
