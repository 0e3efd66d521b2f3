import CZlib
import Foundation

/// Gzip with the system's zlib, for the reports App Store Connect delivers gzipped.
public enum Gzip {
    /// Whether `data` starts with gzip's magic bytes (1f 8b).
    public static func isGzip(_ data: Data) -> Bool {
        data.count >= 2 && data[data.startIndex] == 0x1F && data[data.startIndex + 1] == 0x8B
    }

    /// The bytes `data` inflates to: every member of a multi-member file, in order (as `gunzip`).
    ///
    /// Refuses more than `limit` bytes of output before producing them all, so a small file that
    /// inflates enormously (a "zip bomb") costs at most `limit` bytes of memory. A stream cut short
    /// is `truncatedGzip`, anything zlib refuses (a bad header, a checksum) `corruptGzip`.
    static func decompress(_ data: Data, limit: Int) throws(SalesReportError) -> Data {
        var input = data
        let result = input.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Result<Data, SalesReportError> in
            inflateAll(buffer, limit: limit)
        }
        return try result.get()
    }

    private static let chunkSize = 64 * 1024

    private static func inflateAll(_ input: UnsafeMutableRawBufferPointer, limit: Int) -> Result<Data, SalesReportError> {
        guard let base = input.baseAddress, input.count > 0 else { return .failure(.truncatedGzip()) }
        var stream = z_stream()
        // 15 + 32: the largest window, and zlib detects the gzip header by itself.
        guard inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(.corruptGzip("could not start inflating"))
        }
        defer { inflateEnd(&stream) }
        stream.next_in = base.assumingMemoryBound(to: Bytef.self)
        stream.avail_in = uInt(input.count)

        var output = Data()
        var chunk = [UInt8](repeating: 0, count: chunkSize)
        while true {
            // One byte past the limit is enough to know it is exceeded.
            let room = min(chunkSize, limit - output.count + 1)
            let status = chunk.withUnsafeMutableBufferPointer { out -> Int32 in
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(room)
                return CZlib.inflate(&stream, Z_NO_FLUSH)
            }
            let produced = room - Int(stream.avail_out)
            output.append(contentsOf: chunk[0..<produced])
            if output.count > limit { return .failure(.decompressedTooLarge(limit: limit)) }

            switch status {
            case Z_STREAM_END:
                // The end of one member: another may follow (`cat a.gz b.gz`).
                if stream.avail_in == 0 { return .success(output) }
                guard inflateReset(&stream) == Z_OK else { return .failure(.corruptGzip("could not start the next member")) }
            case Z_OK:
                continue
            case Z_BUF_ERROR where stream.avail_in == 0:
                // No progress with all input consumed: the stream ended before its end.
                return .failure(.truncatedGzip())
            default:
                let reason = stream.msg.map { String(cString: $0) } ?? "error \(status)"
                return .failure(.corruptGzip(reason))
            }
        }
    }
}
