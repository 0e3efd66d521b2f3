import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file operations keys and anchors need, on file descriptors, so that a file's mode is
/// the one it was created with (never a chmod afterwards, which leaves a moment when it is not)
/// and an existing file is never overwritten.
enum AnchorFiles {
    /// Why a file operation failed, as the system says it ("No space left on device"), rather than
    /// Foundation's error dump.
    static func reason(_ error: any Error) -> String {
        let error = error as NSError
        let posix = error.domain == NSPOSIXErrorDomain ? error : error.userInfo[NSUnderlyingErrorKey] as? NSError
        if let posix, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        return error.localizedDescription
    }

    /// Creates `path`, which must not exist yet, with `mode` (less the umask) and the bytes given;
    /// synced to disk before it returns. On any failure nothing is left at `path`.
    static func createNew(at path: String, mode: mode_t, contents: Data) throws(LogAnchorError) {
        let handle = try openNew(at: path, mode: mode)
        do {
            try handle.write(contentsOf: contents)
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            unlink(path)
            throw .output("could not write \(path): \(reason(error))")
        }
    }

    /// Opens `path` for writing, creating it with `mode` (less the umask); refuses an existing file.
    static func openNew(at path: String, mode: mode_t) throws(LogAnchorError) -> FileHandle {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            let reason = errno
            if reason == EEXIST {
                throw .output("\(path) already exists: it is never overwritten. Choose another name, or move the old file away first")
            }
            throw .output("could not create \(path): \(String(cString: strerror(reason)))")
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    /// The bytes of a small file (a key) and its permission bits, read from the one descriptor, so
    /// the mode checked is the mode of the file read.
    static func readSmall(at path: String, limit: Int = 64 * 1024) throws(LogAnchorError) -> (contents: Data, mode: UInt32) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw .keyFile(path, "cannot be opened: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw .keyFile(path, "cannot be examined: \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw .keyFile(path, "is not a regular file")
        }
        guard Int(status.st_size) <= limit else {
            throw .keyFile(path, "is \(status.st_size) bytes, far more than a key")
        }
        var contents = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .keyFile(path, "cannot be read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            contents.append(contentsOf: buffer[0..<count])
            guard contents.count <= limit else { throw .keyFile(path, "is far larger than a key") }
        }
        return (contents, UInt32(status.st_mode))
    }
}
