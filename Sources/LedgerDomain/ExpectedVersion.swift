/// What a writer believes the stream's version to be when it appends.
///
/// Versions count events in the stream: the first event is version 1, an absent stream is at 0.
public enum ExpectedVersion: Hashable, Sendable, CustomStringConvertible {
    /// Append whatever the stream's version is.
    case any
    /// The stream must not have any event yet.
    case noStream
    /// The stream's last event must be this version.
    case exactly(Int64)

    public var description: String {
        switch self {
        case .any: "any"
        case .noStream: "no stream"
        case .exactly(let version): "\(version)"
        }
    }
}
