/// Decodes HTTP/1.1 chunked transfer coding (RFC 9112 §7.1) as bytes arrive, whatever the read
/// boundaries: an NTRIP 2 caster's chunks do not align with RTCM frames, nor with reads.
///
/// `chunk-size [; extensions] CRLF data CRLF` … `0 CRLF [trailers] CRLF`. A size line longer
/// than ``maximumLineLength`` or not hexadecimal is a protocol error (the connection is closed
/// by the caller).
public struct HTTPChunkedDecoder: Sendable {
    public enum Failure: Error, Equatable, Sendable {
        case badChunkSize(String)
        case missingChunkTerminator
        case lineTooLong
    }

    /// Size lines and trailer lines longer than this are refused.
    public static let maximumLineLength = 4096

    private enum State: Sendable {
        case size
        case data(remaining: Int)
        case dataEnd(seenCR: Bool)
        case trailers
        case done
    }

    private var state: State = .size
    private var line: [UInt8] = []

    public init() {}

    /// True once the last chunk and the trailers were read: the body is complete.
    public var isFinished: Bool { if case .done = state { true } else { false } }

    /// Feeds bytes; `body` gets each run of body bytes (valid only during the call).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, body: (UnsafeRawBufferPointer) -> Void) throws(Failure) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .size, .trailers:
                let b = bytes[i]
                i += 1
                if b == 0x0A {
                    let text = line.last == 0x0D ? line.dropLast() : line[...]
                    line.removeAll(keepingCapacity: true)
                    if case .trailers = state {
                        if text.isEmpty { state = .done }
                        continue
                    }
                    let sizeText = text.prefix { $0 != UInt8(ascii: ";") }.filter { $0 != 0x20 && $0 != 0x09 }
                    guard !sizeText.isEmpty, sizeText.count <= 15,
                          let size = Int(String(decoding: sizeText, as: UTF8.self), radix: 16) else {
                        throw .badChunkSize(String(decoding: text.prefix(40), as: UTF8.self))
                    }
                    state = size == 0 ? .trailers : .data(remaining: size)
                } else {
                    guard line.count < Self.maximumLineLength else { throw .lineTooLong }
                    line.append(b)
                }
            case .data(let remaining):
                let take = min(remaining, n - i)
                body(UnsafeRawBufferPointer(rebasing: bytes[i..<(i + take)]))
                i += take
                state = remaining == take ? .dataEnd(seenCR: false) : .data(remaining: remaining - take)
            case .dataEnd(let seenCR):
                let b = bytes[i]
                i += 1
                if b == 0x0D && !seenCR {
                    state = .dataEnd(seenCR: true)
                } else if b == 0x0A {
                    state = .size
                } else {
                    throw .missingChunkTerminator
                }
            case .done:
                // Bytes after the end of the body: nothing of this response.
                return
            }
        }
    }
}
