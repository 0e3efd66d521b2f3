import Foundation

/// Standard output and standard error, written unbuffered, so that piped output arrives whole and
/// in order with the log lines.
///
/// A reader of standard output that went away (`ledger log tail | head`, `ledger audit export |
/// head`) ends the command at once and quietly, with the status a shell gives a program a closed
/// pipe stopped (141), as any Unix tool ends; nothing was lost, the reader wanted no more. Any other
/// failure to write standard output (a full disk) is said on standard error, and the command fails.
/// A closed standard error is passed over: there is nobody to tell.
public enum Output {
    public static func line(_ text: String) {
        write(Data((text + "\n").utf8))
    }

    public static func write(_ data: Data) {
        guard let failure = data.withUnsafeBytes({ writeAll($0, to: STDOUT_FILENO) }) else { return }
        LogSink.shared.flush()
        if failure == EPIPE { exit(141) }
        _ = Data("cannot write standard output: \(String(cString: strerror(failure)))\n".utf8).withUnsafeBytes { writeAll($0, to: STDERR_FILENO) }
        exit(EXIT_FAILURE)
    }

    /// A line for whoever runs the command, after the log lines logged before it.
    public static func error(_ text: String) {
        LogSink.shared.flush()
        progress(text + "\n")
    }

    /// Text on standard error as it is, such as a progress line rewritten in place with `\r`.
    public static func progress(_ text: String) {
        _ = Data(text.utf8).withUnsafeBytes { writeAll($0, to: STDERR_FILENO) }
    }

    public static var errorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Writes every byte to `descriptor`; nil when done, else the `errno` that stopped it.
    public static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let written = Foundation.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written >= 0 {
                offset += written
            } else if errno != EINTR {
                return errno
            }
        }
        return nil
    }
}
