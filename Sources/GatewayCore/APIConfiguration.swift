extension PipelineConfiguration {
    /// The operator HTTP API, the top-level `"api"` key; absent means off.
    ///
    /// ```json
    /// "api": { "listen": "127.0.0.1:9425", "token": "${LOCGATE_API_TOKEN}",
    ///          "tls": { "cert_file": "api.pem", "key_file": "api.key" },
    ///          "health": { "source_stall": "60s", "max_queue_age": "10m" },
    ///          "map": { "tail": 50, "datum": "wgs84" },
    ///          "limits": { "connections": 4096, "per_address": 0 } }
    /// ```
    public struct API: Sendable, Equatable {
        /// The address to bind: an IPv4 or IPv6 literal.
        public var host: String
        /// The TCP port; 0 lets the kernel choose (the log says which).
        public var port: Int
        /// Bearer token every request must carry; nil: none (loopback only). It may submit every command type.
        public var token: String?
        /// More tokens, each with a name (logged with every command it submits) and the command
        /// types it may submit (`api.tokens`).
        public var tokens: [NamedToken] = []

        /// A named API token.
        public struct NamedToken: Sendable, Hashable {
            public var name: String
            public var token: String
            /// The command types it may submit or cancel; every one when nil.
            public var commandTypes: Set<CommandType>?

            public init(name: String, token: String, commandTypes: Set<CommandType>?) {
                self.name = name
                self.token = token
                self.commandTypes = commandTypes
            }
        }
        /// HTTPS instead of HTTP.
        public var tls: ServerTLSOptions?
        /// A source that produced nothing for this long makes `/health` fail.
        public var sourceStall: Duration
        /// A sink whose oldest queued position is older than this makes `/health` fail.
        public var maxQueueAge: Duration
        /// Positions per device the live map (`GET /`) draws as its tail, the newest included.
        public var mapTail: Int
        /// The live map's display datum (`wgs84`, `gcj02`, `bd09`): positions and fences are converted into it.
        public var mapDatum: String

        /// Connections the API serves at once (`limits.connections`); more are refused at accept.
        /// A connection costs a descriptor and a little memory, not a thread.
        public var maxConnections: Int
        /// Connections from one client address at once (`limits.per_address`); 0: no limit (an
        /// operator's scraper, browser and probes often share one address).
        public var maxConnectionsPerAddress: Int

        public static let mapTailRange = 1...200
        /// What `limits.connections` accepts (`limits.per_address`: 0 up to the same bound).
        public static let maxConnectionsRange = 1...100_000
        public static let mapDatums = ["wgs84", "gcj02", "bd09"]

        public static let listenOption = Option("listen", default: "127.0.0.1:9425",
            "Address and port: an IPv4 or IPv6 literal, or localhost; port 0 lets the kernel choose.")
        public static let sourceStallOption = Option("health.source_stall", default: Duration.seconds(60), minimum: .seconds(1),
            "A source that produced no position for this long makes /health fail.")
        public static let maxQueueAgeOption = Option("health.max_queue_age", default: Duration.seconds(600), minimum: .seconds(1),
            "A sink whose oldest queued position is older than this makes /health fail.")
        public static let mapTailOption = Option("map.tail", default: 50, in: mapTailRange,
            "Positions per device the live map draws as its tail, the newest included.")
        public static let mapDatumOption = Option("map.datum", choices: mapDatums, default: "wgs84",
            "The live map's display datum: every position and fence is converted into it.")
        public static let maxConnectionsOption = Option("limits.connections", default: 4096, in: maxConnectionsRange,
            "Connections served at once; one more is closed as soon as it is accepted.")
        public static let maxConnectionsPerAddressOption = Option("limits.per_address", default: 0, in: 0...maxConnectionsRange.upperBound,
            "Connections from one client address at once; 0: no limit.")
        /// `listen`'s default, parsed.
        public static let defaultAddress = ListenAddress(parsing: listenOption.defaultValue)!

        /// The options of `api`, for the configuration reference (Docs/Operations.md).
        public static let options: [OptionSpec] = [
            listenOption.spec,
            OptionSpec("token", "string", default: "none", "Bearer token every request must carry; required when listen is not a loopback address. It may submit every command type."),
            OptionSpec("tokens", "object", default: "none", "More tokens by name: {\"ops\": {\"token\": \"…\", \"commands\": [\"set_interval\", \"position_now\"]}}; a request may carry any of them (and token); commands lists the command types the token may submit or cancel (\"all\" for every one; none when left out), and each command is logged with the token's name."),
        ] + ServerTLSOptions.specs + [
            sourceStallOption.spec, maxQueueAgeOption.spec, mapTailOption.spec, mapDatumOption.spec,
            maxConnectionsOption.spec, maxConnectionsPerAddressOption.spec,
        ]

        public init(host: String = API.defaultAddress.host, port: Int = API.defaultAddress.port, token: String? = nil,
                    tls: ServerTLSOptions? = nil,
                    sourceStall: Duration = API.sourceStallOption.defaultValue, maxQueueAge: Duration = API.maxQueueAgeOption.defaultValue,
                    mapTail: Int = API.mapTailOption.defaultValue, mapDatum: String = API.mapDatumOption.defaultValue,
                    maxConnections: Int = API.maxConnectionsOption.defaultValue,
                    maxConnectionsPerAddress: Int = API.maxConnectionsPerAddressOption.defaultValue) {
            self.host = host
            self.port = port
            self.token = token
            self.tls = tls
            self.sourceStall = sourceStall
            self.maxQueueAge = maxQueueAge
            self.mapTail = mapTail
            self.mapDatum = mapDatum
            self.maxConnections = maxConnections
            self.maxConnectionsPerAddress = maxConnectionsPerAddress
        }

        /// Whether `host` is a loopback address (127.0.0.0/8 or ::1): only this machine can connect.
        public var isLoopback: Bool { ListenAddress.isLoopback(host) }

        /// `host:port`, with brackets around an IPv6 host.
        public var listen: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// Reads the `api` object; every problem is reported with its path.
        static func read(_ reader: inout OptionReader) -> API {
            var api = API()
            let listen = reader.read(API.listenOption)
            if let address = ListenAddress(parsing: listen) {
                api.host = address.host
                api.port = address.port
            } else {
                reader.report("listen", "expected an IP address and a port such as \"127.0.0.1:9425\" or \"[::1]:9425\", got \"\(listen)\"")
            }
            if reader.has("token") {
                if let t = reader.requiredString("token") {
                    if t.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x21 || $0 > 0x7e } ?? true }) {
                        reader.report("token", "must be printable ASCII without spaces (it travels in an HTTP header)")
                    } else {
                        api.token = t
                    }
                }
            }
            if var named = reader.object("tokens") {
                api.tokens = readTokens(&named)
                named.finish()
            }
            if var tls = reader.object("tls") {
                api.tls = ServerTLSOptions.read(&tls)
                tls.finish()
            }
            if var health = reader.object("health") {
                api.sourceStall = health.read(API.sourceStallOption)
                api.maxQueueAge = health.read(API.maxQueueAgeOption)
                health.finish()
            }
            if var map = reader.object("map") {
                api.mapTail = map.read(API.mapTailOption)
                api.mapDatum = map.read(API.mapDatumOption)
                map.finish()
            }
            if var limits = reader.object("limits") {
                api.maxConnections = limits.read(API.maxConnectionsOption)
                api.maxConnectionsPerAddress = limits.read(API.maxConnectionsPerAddressOption)
                limits.finish()
            }
            if !api.isLoopback && api.token == nil && !reader.has("token") && api.tokens.isEmpty && !reader.has("tokens") {
                reader.report("token", "required when listen is not a loopback address (\(api.listen)): without it anyone who reaches the port reads every position")
            }
            return api
        }

        /// `tokens`: name → {"token", "commands"}.
        static func readTokens(_ reader: inout OptionReader) -> [NamedToken] {
            var out: [NamedToken] = []
            for name in reader.object.keys.sorted() {
                guard var t = reader.object(name) else { continue }
                defer { t.finish() }
                guard let token = t.requiredString("token") else { continue }
                if token.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x21 || $0 > 0x7e } ?? true }) {
                    t.report("token", "must be printable ASCII without spaces (it travels in an HTTP header)")
                    continue
                }
                var types: Set<CommandType>? = []
                let commands = t.value("commands")
                if commands?.stringValue == "all" {
                    types = nil
                } else if let list = commands?.arrayValue {
                    var listed: Set<CommandType> = []
                    for (i, item) in list.enumerated() {
                        if let s = item.stringValue, let type = CommandType(rawValue: s) { listed.insert(type) } else {
                            t.report("commands[\(i)]", "expected a command type: \(CommandType.allCases.map(\.rawValue).joined(separator: ", "))")
                        }
                    }
                    types = listed
                } else if commands != nil {
                    t.report("commands", "expected \"all\" or a list of command types")
                }
                out.append(NamedToken(name: name, token: token, commandTypes: types))
            }
            return out
        }
    }
}
