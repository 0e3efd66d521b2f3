import Foundation
import LedgerTesting

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection to the ledger that sends exactly the bytes a test writes: half a request, a
/// body that never comes, nothing at all; things an HTTP client library will not do.
final class RawConnection: @unchecked Sendable {
    // A descriptor used by one test task at a time; closed once, in `close`.
    private var descriptor: Int32

    /// Connects to 127.0.0.1:`port`.
    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw HarnessError(message: "socket() failed (errno \(errno))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            closeDescriptor(descriptor)
            throw HarnessError(message: "connect to 127.0.0.1:\(port) failed (errno \(errno))")
        }
    }

    /// The port of an `http://127.0.0.1:PORT` base.
    convenience init(base: String) throws {
        guard let port = URL(string: base)?.port else { throw HarnessError(message: "no port in \(base)") }
        try self.init(port: port)
    }

    func send(_ text: String) throws {
        try send(Data(text.utf8))
    }

    func send(_ data: Data) throws {
        let sent = data.withUnsafeBytes { sendBytes(descriptor, $0.baseAddress, $0.count) }
        guard sent == data.count else { throw HarnessError(message: "send() sent \(sent) of \(data.count) bytes (errno \(errno))") }
    }

    /// Everything the server sends until it closes the connection, or until `timeout` passes;
    /// `closed` says which. With `awaited`, also stops as soon as what was received contains it (a
    /// stream that stays open). Blocking reads run off the cooperative pool.
    func receiveUntilClosed(timeout: Duration, orUntil awaited: String? = nil) async -> (text: String, closed: Bool) {
        let descriptor = self.descriptor
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var received = Data()
                var closed = false
                let deadline = ContinuousClock.now + timeout
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while ContinuousClock.now < deadline {
                    var descriptors = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                    let left = deadline - ContinuousClock.now
                    let milliseconds = Int32(max(1, min(1_000, left / .milliseconds(1))))
                    guard poll(&descriptors, 1, milliseconds) > 0 else { continue }
                    let count = recv(descriptor, &buffer, buffer.count, 0)
                    if count > 0 {
                        received.append(contentsOf: buffer[0..<count])
                        if let awaited, String(decoding: received, as: UTF8.self).contains(awaited) { break }
                    } else {
                        // 0: the server closed it; an error (a reset) ends it too.
                        closed = true
                        break
                    }
                }
                continuation.resume(returning: (String(decoding: received, as: UTF8.self), closed))
            }
        }
    }

    func close() {
        guard descriptor >= 0 else { return }
        closeDescriptor(descriptor)
        descriptor = -1
    }

    deinit { close() }
}

/// close(2) and send(2), which the methods of the same names would shadow inside the class.
private func closeDescriptor(_ descriptor: Int32) {
    close(descriptor)
}

private func sendBytes(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    send(descriptor, bytes, count, Int32(MSG_NOSIGNAL))
}
