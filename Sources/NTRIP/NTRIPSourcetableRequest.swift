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
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var received: [UInt8] = []
        var closed = false
        while !closed {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw Failure(description: "the sourcetable did not arrive within \(DurationText.format(timeout))") }
            switch try await socket.read(into: &buffer, timeout: left, wakeup: wakeup) {
            case .bytes(let n): received += buffer[0..<n]
            case .nothing: break
            case .end: closed = true
            }
            guard received.count <= maximumLength else { throw Failure(description: "the sourcetable is larger than 8 MB") }
            // Done at ENDSOURCETABLE (casters that keep the connection open) or when the caster closes.
            if let (head, start) = try? NTRIPResponseHead.parse(received, atEnd: closed) {
                if head.kind == .unauthorized { throw Failure(description: "401 Unauthorized: the sourcetable needs a user and password") }
                if case .refused(let code, let reason) = head.kind { throw Failure(description: "the caster answered \(code) \(reason)") }
                if head.kind == .data { throw Failure(description: "the caster sent data, not its sourcetable") }
                let body = try decodeBody(Array(received[start...]), chunked: head.chunked)
                let table = NTRIPSourcetable(text: String(decoding: body, as: UTF8.self))
                if table.complete || closed || head.contentLength.map({ body.count >= $0 }) == true { return table }
            } else if closed {
                throw Failure(description: received.isEmpty ? "the caster closed the connection without an answer" : "not an NTRIP answer: \(String(decoding: received.prefix(40), as: UTF8.self))")
            }
        }
        throw Failure(description: "the caster closed the connection")
    }

    static func decodeBody(_ bytes: [UInt8], chunked: Bool) throws -> [UInt8] {
        guard chunked else { return bytes }
        var decoder = HTTPChunkedDecoder()
        var out: [UInt8] = []
        try bytes.withUnsafeBytes { raw in try decoder.feed(raw) { out += $0 } }
        return out
    }
}
