import Foundation

/// A TCP socket bound to 127.0.0.1 on a port the kernel picks, for tests and benchmarks that need
/// a port of their own: one nothing listens on, or one that listens and never accepts.
public struct LoopbackSocket: Sendable {
    public let descriptor: Int32
    public let port: Int

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Bound, and listening with room for `backlog` connections when given.
    public init(listening backlog: Int32? = nil) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "cannot open a socket (errno \(errno))") }
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && (backlog.map { listen(descriptor, $0) == 0 } ?? true)
                    && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard ready else {
            let reason = errno
            Foundation.close(descriptor)
            throw Failure(description: "cannot bind\(backlog == nil ? "" : " and listen on") a loopback socket (errno \(reason))")
        }
        self.descriptor = descriptor
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// A port nothing listens on now (bound, then let go).
    public static func freePort() throws -> Int {
        let socket = try LoopbackSocket()
        socket.close()
        return socket.port
    }

    /// A new socket connected to this one's port.
    public func connected() throws -> Int32 {
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: port)
        let done = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard client >= 0, done else {
            let reason = errno
            if client >= 0 { Foundation.close(client) }
            throw Failure(description: "cannot connect to 127.0.0.1:\(port) (errno \(reason))")
        }
        return client
    }

    public func close() {
        _ = Foundation.close(descriptor)
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }
}
