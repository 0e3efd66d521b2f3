/// A failure reported as one line, without the usage text that `ValidationError` adds.
public struct CommandFailure: Error, CustomStringConvertible {
    public let message: String

    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}
