import CZlib
import Foundation

extension Gzip {
    /// `data` as one gzip member, made with the system's zlib: how Apple delivers its reports (the
    /// simulator writes them so, and the tests check `decompress` against it).
    public static func compress(_ data: Data) -> Data {
        var stream = z_stream()
        // 15 + 16: the largest window, with a gzip header and trailer rather than zlib's.
        let started = deflateInit2_(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                                    Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "deflateInit2_ failed: \(started)")
        defer { deflateEnd(&stream) }

        var input = [UInt8](data)
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 64)
        let status = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        precondition(status == Z_STREAM_END, "deflate did not finish: \(status)")
        return Data(output[0..<Int(stream.total_out)])
    }
}
