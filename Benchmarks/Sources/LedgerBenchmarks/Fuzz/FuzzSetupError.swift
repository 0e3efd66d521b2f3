import Logging
import ServiceLifecycle

/// The world could not be set up; says what failed.
public struct FuzzSetupError: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
