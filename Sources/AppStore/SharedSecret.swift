/// An app's shared secret for auto-renewable receipts (the `password` of a `verifyReceipt` request).
///
/// Its descriptions and mirror are redacted, so that interpolating or dumping a request that carries
/// one can never put the secret in a log.
public struct SharedSecret: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The secret itself; read it only to put it in a request body.
    public let value: String

    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<redacted shared secret>" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
