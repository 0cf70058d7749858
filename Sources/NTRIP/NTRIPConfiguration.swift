import GatewayCore

/// Where and how an NTRIP client connects, read from a configuration (the serial source's
/// `corrections`) or the command line (`locgate ntrip sourcetable URL`).
public struct NTRIPConfiguration: Sendable, Equatable {
    /// When the client sends GGA upstream.
    public enum GGAPolicy: String, Sendable, Equatable, CaseIterable {
        /// When the mountpoint's sourcetable entry asks for it (`nmea` = 1); when the table
        /// cannot be read or lacks the mountpoint, GGA is sent (a virtual reference station
        /// sends nothing without it; other casters ignore it).
        case auto
        case always
        case never
    }

    public var host: String
    public var port: Int
    /// Without the leading `/`; empty for the sourcetable.
    public var mountpoint: String
    public var user: String?
    public var password: String?
    /// 1: `GET … HTTP/1.0`, answered `ICY 200 OK`; 2: HTTP/1.1 with `Ntrip-Version: Ntrip/2.0`.
    public var version: Int = 2
    public var gga: GGAPolicy = .auto
    public var ggaInterval: Duration = .seconds(10)
    /// No byte from the caster for this long: the connection is closed and made again.
    public var stallTimeout: Duration = .seconds(20)
    public var connectTimeout: Duration = .seconds(10)
    /// The first delay after a failure; each failure in a row doubles it up to ``backoffCap``.
    public var backoffInitial: Duration = .seconds(10)
    public var backoffCap: Duration = .seconds(300)
    /// The delay after a 401, whatever the backoff: a wrong password does not heal in seconds,
    /// and public casters ban clients that hammer them.
    public var unauthorizedRetry: Duration = .seconds(600)
    /// A connection that delivered corrections this long resets the backoff.
    public var stableAfter: Duration = .seconds(60)

    public init(host: String, port: Int = 2101, mountpoint: String) {
        self.host = host
        self.port = port
        self.mountpoint = mountpoint
    }

    /// `host:port/mountpoint` (no credentials), for logs.
    public var display: String { "\(host.contains(":") ? "[\(host)]" : host):\(port)/\(mountpoint)" }

    /// Reads `ntrip://[user[:password]@]host[:port]/MOUNTPOINT` (also `http://`); the default
    /// port is 2101. Credentials in the URL are percent-decoded. nil with the problem when the
    /// text is not such a URL.
    public static func parse(url text: String) -> Result<NTRIPConfiguration, URLProblem> {
        var rest = Substring(text)
        for scheme in ["ntrip://", "http://"] where rest.lowercased().hasPrefix(scheme) {
            rest = rest.dropFirst(scheme.count)
        }
        if rest.contains("://") { return .failure(URLProblem("only ntrip:// and http:// are supported (TLS casters are not: see Plugins/SerialInput/README.md)")) }
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count).drop { $0 == "/" }
        var user: String?, password: String?
        var hostPort = authority
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                user = percentDecoded(credentials[..<colon])
                password = percentDecoded(credentials[credentials.index(after: colon)...])
            } else {
                user = percentDecoded(credentials)
            }
        }
        var host = String(hostPort)
        var port = 2101
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { return .failure(URLProblem("an IPv6 address needs its closing ]")) }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { return .failure(URLProblem("bad port \"\(after.dropFirst())\"")) }
                port = p
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            guard let p = Int(hostPort[hostPort.index(after: colon)...]), (1...65535).contains(p) else {
                return .failure(URLProblem("bad port \"\(hostPort[hostPort.index(after: colon)...])\""))
            }
            host = String(hostPort[..<colon])
            port = p
        }
        guard !host.isEmpty else { return .failure(URLProblem("no caster host (ntrip://HOST:2101/MOUNTPOINT)")) }
        let mountpoint = String(path.prefix { $0 != "?" && $0 != "#" })
        guard !mountpoint.contains("/") && !mountpoint.contains(" ") else { return .failure(URLProblem("a mountpoint has no / or space: \"\(mountpoint)\"")) }
        var c = NTRIPConfiguration(host: host, port: port, mountpoint: mountpoint)
        c.user = user
        c.password = password
        if let password { Redaction.register(password) }
        return .success(c)
    }

    public struct URLProblem: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
        init(_ d: String) { description = d }
    }

    static func percentDecoded(_ s: Substring) -> String {
        var out: [UInt8] = []
        var i = s.utf8.startIndex
        let u = s.utf8
        while i < u.endIndex {
            let b = u[i]
            if b == UInt8(ascii: "%"), let h = u.index(i, offsetBy: 2, limitedBy: u.index(before: u.endIndex)),
               let v = UInt8(String(decoding: u[u.index(after: i)...h], as: UTF8.self), radix: 16) {
                out.append(v)
                i = u.index(after: h)
            } else {
                out.append(b)
                i = u.index(after: i)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - From a configuration

    /// The options of a `corrections` object, for documentation and `locgate validate`.
    public static let optionNames = ["url", "user", "password", "version", "gga", "gga_interval", "stall_timeout",
                                     "connect_timeout", "backoff", "backoff_cap", "unauthorized_retry"]

    /// Reads a `corrections` object; problems are reported at their paths. nil when unusable.
    public static func read(_ options: inout OptionReader) -> NTRIPConfiguration? {
        guard let url = options.requiredString("url") else { return nil }
        var c: NTRIPConfiguration
        switch parse(url: url) {
        case .success(let parsed): c = parsed
        case .failure(let problem):
            options.report("url", problem.description)
            return nil
        }
        if c.mountpoint.isEmpty { options.report("url", "no mountpoint: ntrip://HOST:PORT/MOUNTPOINT (list them with `locgate ntrip sourcetable ntrip://HOST:PORT`)") }
        if let user = options.string("user") { c.user = user }
        if let password = options.secretString("password") { c.password = password }
        if c.password != nil && c.user == nil { options.report("password", "a password needs a user") }
        c.version = options.optionalInt("version", in: 1...2) ?? c.version
        if let g = options.optionalChoice("gga", GGAPolicy.allCases.map(\.rawValue)) { c.gga = GGAPolicy(rawValue: g) ?? .auto }
        c.ggaInterval = options.duration("gga_interval", default: c.ggaInterval, minimum: .seconds(1))
        c.stallTimeout = options.duration("stall_timeout", default: c.stallTimeout, minimum: .seconds(1))
        c.connectTimeout = options.duration("connect_timeout", default: c.connectTimeout, minimum: .milliseconds(100))
        c.backoffInitial = options.duration("backoff", default: c.backoffInitial, minimum: .seconds(10))
        c.backoffCap = options.duration("backoff_cap", default: c.backoffCap, minimum: c.backoffInitial)
        c.unauthorizedRetry = options.duration("unauthorized_retry", default: c.unauthorizedRetry, minimum: .seconds(60))
        return c.mountpoint.isEmpty ? nil : c
    }
}
