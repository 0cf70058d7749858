#if canImport(Glibc)
import Glibc
#endif

/// An IP address and port to listen on, as written in a configuration (`"127.0.0.1:9425"`,
/// `"[::1]:5027"`, `"0.0.0.0:5023"`, `"localhost:5055"`).
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A numeric IPv4 or IPv6 address (`localhost` is read as `127.0.0.1`).
    public var host: String
    /// 0 asks the kernel for a free port.
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` with brackets around an IPv6 host; nil when the text is not an IP
    /// address and a port 0–65535.
    public init?(parsing text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }  // an IPv6 address needs brackets
        }
        guard let port = Int(portText), (0...65_535).contains(port), !portText.hasPrefix("+") else { return nil }
        let name = host == "localhost" ? "127.0.0.1" : String(host)
        guard ListenAddress.addressFamily(name) != nil else { return nil }
        self.init(host: name, port: port)
    }

    /// The problem text for a `listen` option that does not parse.
    public static func problem(_ text: String, example: String) -> String {
        "expected an IP address and a port such as \"\(example)\" or \"[::1]:\(example.split(separator: ":").last ?? "")\", got \"\(text)\""
    }

    /// `host:port`, with brackets around an IPv6 host.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Whether `host` is a loopback address (127.0.0.0/8 or ::1): only this machine can connect.
    public var isLoopback: Bool { ListenAddress.isLoopback(host) }

    /// AF_INET or AF_INET6 for an IP literal, nil for anything else.
    public static func addressFamily(_ host: String) -> Int32? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return AF_INET }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return AF_INET6 }
        return nil
    }

    /// Whether an IP literal is a loopback address, IPv4-mapped ones included.
    public static func isLoopback(_ host: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        // An IPv4-mapped loopback address (::ffff:127.x.y.z).
        return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
    }
}
