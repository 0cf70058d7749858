import GatewayCore
#if canImport(Glibc)
import Glibc
#endif

/// How to reach a NATS cluster: the options every NATS component (the `nats` sink, and the
/// `nats` source of a later change) reads the same way, with the same names and defaults.
public struct NATSConnectionOptions: Sendable, Hashable {
    public static let connectTimeoutOption = Option("connect_timeout", default: Duration.seconds(5), minimum: .milliseconds(10),
        "Timeout of one connection attempt to one server.")
    public static let reconnectInitialOption = Option("reconnect.initial", default: Duration.milliseconds(200), minimum: .milliseconds(1),
        "Wait after the first round over all servers failed; doubles per round.")
    public static let reconnectMaxOption = Option("reconnect.max", default: Duration.seconds(5), minimum: .milliseconds(1),
        "Longest wait between reconnection rounds (retried forever).")

    /// How the client proves who it is; at most one method.
    public enum Credentials: Sendable, Hashable {
        case none
        /// A `.creds` file (user JWT and NKey seed), as `nsc` writes it.
        case credentialsFile(path: String)
        /// An NKey user: its public key and the file holding its seed.
        case nkey(publicKey: String, seedFile: String)
        case token(String)
        case userPassword(user: String, password: String)
    }

    /// TLS to the servers; with `verify` false the server certificate is not checked (tests only).
    public typealias TLS = ClientTLSOptions

    /// `nats://host:port` or `tls://host:port`; the client also learns the other cluster members from them.
    public var servers: [String] = []
    public var credentials: Credentials = .none
    public var tls: TLS?
    public var connectTimeout = NATSConnectionOptions.connectTimeoutOption.defaultValue
    /// Reconnect delay after a whole round over the servers failed: starts here, doubles up to `reconnectMax`.
    public var reconnectInitial = NATSConnectionOptions.reconnectInitialOption.defaultValue
    public var reconnectMax = NATSConnectionOptions.reconnectMaxOption.defaultValue
    /// Shown by the server (`/connz`) so an operator can tell gateways apart.
    public var name: String = "locgate"

    public init() {}

    /// The option rows of every NATS component, in the order `read` asks for them.
    public static let specs: [OptionSpec] = [
        OptionSpec("servers", "array", required: true, "Server URLs, nats://host:port or tls://host:port (port 4222 when omitted); more cluster members are learned from the servers. Reconnects to any of them, forever."),
        OptionSpec("credentials", "path", default: "none", "A .creds file (user JWT and NKey seed) from nsc."),
        OptionSpec("nkey", "string", default: "none", "Public key of an NKey user (U…); needs nkey_seed."),
        OptionSpec("nkey_seed", "path", default: "none", "File holding the NKey user's seed (SU…); needs nkey."),
        OptionSpec("token", "string", default: "none", "Authentication token; ${ENV} allowed."),
        OptionSpec("user", "string", default: "none", "User name; with password."),
        OptionSpec("password", "string", default: "none", "Password of user; ${ENV} allowed."),
        OptionSpec("tls", "object", default: "none", "TLS to the servers (implied by a tls:// URL): {\"ca_file\", \"cert_file\", \"key_file\", \"verify\"}."),
    ] + ClientTLSOptions.specs(peer: "the server") + [
        connectTimeoutOption.spec,
        reconnectInitialOption.spec,
        reconnectMaxOption.spec,
    ]

    /// Reads the connection options of a component, reporting each problem at its path.
    /// Files are checked for readability here so `locgate validate` reports them.
    public static func read(_ options: inout OptionReader) -> NATSConnectionOptions {
        var c = NATSConnectionOptions()
        var secureURL = false
        if let servers = options.stringArray("servers") {
            if servers.isEmpty { options.report("servers", "must list at least one server URL") }
            for (i, url) in servers.enumerated() {
                Redaction.registerCredentials(inURL: url)
                switch NATSServerURL.check(url) {
                case .success(let isTLS): secureURL = secureURL || isTLS
                case .failure(let problem): options.report("servers[\(i)]", problem.message)
                }
            }
            c.servers = servers
        } else if !options.has("servers") {
            options.report("servers", "required option is missing: give the server URLs, e.g. [\"nats://127.0.0.1:4222\"]")
        }

        var methods: [String] = []
        if let path = readableFile(&options, "credentials") {
            c.credentials = .credentialsFile(path: path)
            methods.append("credentials")
        }
        let nkey = options.string("nkey")
        let seed = readableFile(&options, "nkey_seed")
        if let nkey, let seed {
            if !nkey.hasPrefix("U") { options.report("nkey", "expected the public key of an NKey user (starts with U)") }
            c.credentials = .nkey(publicKey: nkey, seedFile: seed)
            methods.append("nkey")
        } else if nkey != nil {
            options.report("nkey_seed", "required with nkey: the file holding the user's seed")
        } else if seed != nil {
            options.report("nkey", "required with nkey_seed: the user's public key")
        }
        if let token = options.secretString("token") {
            c.credentials = .token(token)
            methods.append("token")
        }
        let user = options.string("user")
        let password = options.secretString("password")
        if let user {
            c.credentials = .userPassword(user: user, password: password ?? "")
            methods.append("user")
        } else if password != nil {
            options.report("password", "only used with user")
        }
        if methods.count > 1 {
            options.report(methods[1], "give one way to authenticate, not \(methods.joined(separator: " and "))")
        }

        if var tls = options.object("tls") {
            c.tls = ClientTLSOptions.read(&tls, checkFiles: true)
            tls.finish()
        } else if secureURL {
            c.tls = TLS()
        }

        c.connectTimeout = options.read(connectTimeoutOption)
        if var reconnect = options.object("reconnect") {
            c.reconnectInitial = reconnect.read(reconnectInitialOption)
            c.reconnectMax = reconnect.read(reconnectMaxOption)
            if c.reconnectMax < c.reconnectInitial {
                reconnect.report("max", "must be at least reconnect.initial (\(DurationText.format(c.reconnectInitial)))")
            }
            reconnect.finish()
        }
        return c
    }

    /// A path option whose file must exist and be readable now: a missing CA or key file is a
    /// configuration error with its path, not a connection error found at run time.
    private static func readableFile(_ options: inout OptionReader, _ key: String) -> String? {
        guard let path = options.filePath(key) else { return nil }
        if access(path, R_OK) != 0 {
            options.report(key, "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        return path
    }
}

/// Checks a server URL the way the client will read it, so a typo is a configuration error.
extension NATSConnectionOptions {
    /// Host and port of every server URL (4222 when the URL has none), for reachability checks.
    public var serverAddresses: [(url: String, host: String, port: Int)] {
        servers.compactMap { url in
            var rest = Substring(url)
            if let r = rest.range(of: "://") { rest = rest[r.upperBound...] }
            if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
            if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
            var host = rest
            var port = 4222
            if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
                host = rest[..<colon]
                guard let n = Int(rest[rest.index(after: colon)...]) else { return nil }
                port = n
            }
            if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
            return host.isEmpty ? nil : (url, String(host), port)
        }
    }
}

enum NATSServerURL {
    struct Problem: Error { var message: String }

    /// Whether the URL asks for TLS, or why it is not a server URL.
    static func check(_ url: String) -> Result<Bool, Problem> {
        if url.contains(where: { $0 == " " || $0 == "\t" }) { return .failure(Problem(message: "a server URL has no spaces: \"\(url)\"")) }
        var rest = Substring(url)
        var isTLS = false
        if let r = rest.range(of: "://") {
            let scheme = rest[..<r.lowerBound].lowercased()
            switch scheme {
            case "nats": break
            case "tls": isTLS = true
            default: return .failure(Problem(message: "expected nats://host:port or tls://host:port, got scheme \"\(scheme)\" in \"\(url)\""))
            }
            rest = rest[r.upperBound...]
        }
        // user:password@ before the host is the client's business; only host and port are checked.
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var host = rest
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            host = rest[..<colon]
            let port = rest[rest.index(after: colon)...]
            guard let n = Int(port), (1...65535).contains(n) else {
                return .failure(Problem(message: "port must be between 1 and 65535 in \"\(url)\""))
            }
        }
        if host.isEmpty { return .failure(Problem(message: "no host in \"\(url)\"")) }
        return .success(isTLS)
    }
}
