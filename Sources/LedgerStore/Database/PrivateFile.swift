import Foundation
import LedgerApplication

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files only their owner may read (passwords, keys), created with that mode from the start.
///
/// Writing a file and then changing its mode leaves a moment in which others may open it (and keep
/// it open). Here the content goes to a new file made with `O_CREAT | O_EXCL` and mode 0600, then
/// is moved into place, so that the name never shows anything else: no other mode, no half-written
/// content.
public enum PrivateFile {
    /// The account that should own a file instead of the running user (a server user, as root).
    public struct Owner: Sendable {
        public let uid: uid_t
        public let gid: gid_t

        public init(uid: uid_t, gid: gid_t) {
            self.uid = uid
            self.gid = gid
        }
    }

    /// Writes `data` to `url`, replacing what is there.
    public static func write(_ data: Data, to url: URL, owner: Owner? = nil) throws(StoreError) {
        let temporary = try writeTemporary(data, beside: url, owner: owner)
        guard rename(temporary, url.path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw .localServer("cannot write \(url.path) (\(String(cString: strerror(failure))))")
        }
    }

    /// Writes `data` to `url` only if nothing is there; false when something already was (another
    /// process may have won a race to create it).
    public static func create(_ data: Data, at url: URL, owner: Owner? = nil) throws(StoreError) -> Bool {
        let temporary = try writeTemporary(data, beside: url, owner: owner)
        defer { unlink(temporary) }
        // link() fails if the name exists: exactly one of two racing processes places its file.
        guard link(temporary, url.path) == 0 else {
            let failure = errno
            if failure == EEXIST { return false }
            throw .localServer("cannot create \(url.path) (\(String(cString: strerror(failure))))")
        }
        return true
    }

    /// The permission bits of a file (e.g. 0o600), nil when it does not exist.
    public static func mode(of url: URL) -> mode_t? {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    private static func writeTemporary(_ data: Data, beside url: URL, owner: Owner?) throws(StoreError) -> String {
        let temporary = url.path + ".\(UUID().uuidString).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .localServer("cannot create \(temporary) (\(String(cString: strerror(errno))))")
        }
        var failure: String?
        if let owner, fchown(descriptor, owner.uid, owner.gid) != 0 {
            failure = "cannot give it to uid \(owner.uid) (\(String(cString: strerror(errno))))"
        }
        if failure == nil {
            failure = data.withUnsafeBytes { buffer -> String? in
                var offset = 0
                while offset < buffer.count {
                    let written = writeBytes(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return String(cString: strerror(errno))
                    }
                    offset += written
                }
                return nil
            }
        }
        if failure == nil, fsync(descriptor) != 0 { failure = String(cString: strerror(errno)) }
        close(descriptor)
        if let failure {
            unlink(temporary)
            throw .localServer("cannot write \(temporary): \(failure)")
        }
        return temporary
    }
}

/// write(2), which `PrivateFile.write` would shadow inside the type.
private func writeBytes(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
