import GatewayCore
import SystemIO

/// Reads a caster's sourcetable (`GET /`), for `locgate ntrip sourcetable URL` and the client's
/// auto GGA.
public enum NTRIPSourcetableRequest {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The largest table read (public casters list thousands of mountpoints: about 1 MB).
    public static let maximumLength = 8 * 1024 * 1024

    /// Fetches and parses the table within `timeout`.
    public static func fetch(_ configuration: NTRIPConfiguration, wakeup: Wakeup, timeout: Duration) async throws -> NTRIPSourcetable {
        let deadline = ContinuousClock.now + timeout
        let socket = try await Socket.connect(host: configuration.host, port: configuration.port, timeout: configuration.connectTimeout, wakeup: wakeup)
        try await socket.sendAll(NTRIPRequest.bytes(configuration, mountpoint: ""), timeout: timeout, wakeup: wakeup)
        // The table's text, chunked decoding done as it arrives.
        var body: [UInt8] = []
        var chunked: HTTPChunkedDecoder?
        func take(_ bytes: ArraySlice<UInt8>) throws {
            guard chunked != nil else { body += bytes; return }
            do {
                try bytes.withUnsafeBytes { raw in try chunked?.feed(raw) { body += $0 } }
            } catch {
                throw Failure(description: "bad chunked encoding in the sourcetable: \(error)")
            }
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var reader = NTRIPResponseHead.Reader()
        var head: (head: NTRIPResponseHead, length: Int)?
        var closed = false
        while !closed {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw Failure(description: "the sourcetable did not arrive within \(DurationText.format(timeout))") }
            var count = 0
            switch try await socket.read(into: &buffer, timeout: left, wakeup: wakeup) {
            case .bytes(let n): count = n
            case .nothing: break
            case .end: closed = true
            }
            guard reader.received.count + count <= maximumLength else { throw Failure(description: "the sourcetable is larger than 8 MB") }
            if head == nil {
                do {
                    head = try reader.feed(buffer[0..<count], atEnd: closed)
                } catch {
                    throw Failure(description: "not an NTRIP answer: \(error)")
                }
                guard let (h, _) = head else {
                    if closed { throw Failure(description: reader.received.isEmpty ? "the caster closed the connection without an answer" : "not an NTRIP answer: \(String(decoding: reader.received.prefix(40), as: UTF8.self))") }
                    continue
                }
                if h.kind == .unauthorized { throw Failure(description: "401 Unauthorized: the sourcetable needs a user and password") }
                if case .refused(let code, let reason) = h.kind { throw Failure(description: "the caster answered \(code) \(reason)") }
                if h.kind == .data { throw Failure(description: "the caster sent data, not its sourcetable") }
                if h.chunked { chunked = HTTPChunkedDecoder() }
                try take(reader.received[head!.length...])
            } else {
                try take(buffer[0..<count])
            }
            guard let (h, _) = head else { continue }
            // Done at the last chunk, at ENDSOURCETABLE (casters that keep the connection open),
            // at Content-Length, or when the caster closes. The marker is looked for at the end only.
            let ended = String(decoding: body.suffix(64), as: UTF8.self).contains("ENDSOURCETABLE")
            if closed || ended || chunked?.isFinished == true || (!h.chunked && h.contentLength.map({ body.count >= $0 }) == true) {
                return NTRIPSourcetable(text: String(decoding: body, as: UTF8.self))
            }
        }
        throw Failure(description: "the caster closed the connection")
    }
}
