import CZlib

/// gzip compression of request bodies. This is the only file that talks to zlib.
enum Gzip {
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var description: String { "zlib error \(code)" }
    }

    /// The gzip (RFC 1952) form of `input`.
    static func compress(_ input: [UInt8], level: Int32 = 6) throws -> [UInt8] {
        var stream = z_stream()
        try check(czlib_deflate_init_gzip(&stream, level))
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(input.count))) + 32
        var output = [UInt8](repeating: 0, count: bound)
        let produced: Int = try input.withUnsafeBufferPointer { inBuf in
            try output.withUnsafeMutableBufferPointer { outBuf in
                // zlib's API takes a non-const pointer but does not write through next_in.
                stream.next_in = UnsafeMutablePointer(mutating: inBuf.baseAddress)
                stream.avail_in = uInt(inBuf.count)
                stream.next_out = outBuf.baseAddress
                stream.avail_out = uInt(outBuf.count)
                try check(deflate(&stream, Z_FINISH), accept: Z_STREAM_END)
                return outBuf.count - Int(stream.avail_out)
            }
        }
        output.removeLast(output.count - produced)
        return output
    }

    private static func check(_ rc: Int32, accept: Int32 = Z_OK) throws {
        guard rc == accept else { throw Failure(code: rc) }
    }
}
