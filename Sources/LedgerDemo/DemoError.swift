/// A demo step that did not go as the story expects; the message names the request and the answer.
public struct DemoError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
