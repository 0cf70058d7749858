import GatewayCore
import Synchronization

/// The operator HTTP API: `GET /metrics`, `/health` and `/positions/latest` over a running pipeline.
///
/// Build a ``PipelineMonitor`` first and give it to the pipeline as its observer, then make the
/// API from the pipeline's statistics and ``start(logger:)`` it; ``stop()`` after the pipeline ended.
///
/// Location data is personal: with a token every request must carry `Authorization: Bearer
/// <token>` (compared in constant time), or gets 401; validation refuses a non-loopback address
/// without one.
public final class OperatorAPI: Sendable {
    public static let paths = ["/metrics", "/health", "/positions/latest"]

    public let settings: PipelineConfiguration.API
    public let monitor: PipelineMonitor
    /// The components served, replaced when a reload changes the pipeline.
    private let view: Mutex<(components: [MonitoredComponent], sourceIDs: [String])>
    private let version: String
    private let server = Mutex<HTTPServer?>(nil)

    /// `stats` are the pipeline's `componentStats`; `configuration` gives each its kind and type.
    public init(settings: PipelineConfiguration.API, configuration: PipelineConfiguration, stats: [ComponentStats],
                monitor: PipelineMonitor, version: String) {
        self.settings = settings
        self.monitor = monitor
        self.version = version
        view = Mutex(OperatorAPI.view(configuration, stats))
    }

    /// Serves the components of a reloaded pipeline (`stats` are its new `componentStats`).
    public func update(configuration: PipelineConfiguration, stats: [ComponentStats]) {
        let v = OperatorAPI.view(configuration, stats)
        view.withLock { $0 = v }
    }

    private static func view(_ configuration: PipelineConfiguration, _ stats: [ComponentStats]) -> (components: [MonitoredComponent], sourceIDs: [String]) {
        let byPath = Dictionary(configuration.components.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        return (stats.compactMap { s in byPath[s.id].map { MonitoredComponent(stats: s, kind: $0.kind, type: $0.type) } },
                configuration.sources.map(\.id))
    }

    /// Binds the configured address and serves until ``stop()``; returns the port bound.
    @discardableResult
    public func start(logger: Logger) throws(HTTPServerError) -> Int {
        var tls: (String, String)?
        if let cert = settings.tlsCertFile, let key = settings.tlsKeyFile {
            guard HTTPServer.supportsTLS else { throw HTTPServerError(description: "this libmicrohttpd was built without TLS; remove api.tls or install one with it") }
            tls = (cert, key)
        }
        let s = try HTTPServer(host: settings.host, port: settings.port, tls: tls) { [self] request in handle(request) }
        server.withLock { $0 = s }
        var shown = settings
        shown.port = s.port
        logger.info("serving \(tls == nil ? "http" : "https")://\(shown.listen) \(OperatorAPI.paths.joined(separator: " "))\(settings.token == nil ? "" : " (bearer token required)")")
        return s.port
    }

    /// Stops serving: answers in progress finish, the socket closes.
    public func stop() {
        let s = server.withLock { s in
            defer { s = nil }
            return s
        }
        // The daemon stops here, outside the lock: its threads may be answering a request.
        _ = consume s
    }

    // MARK: - Requests

    /// The answer to one request (called on the HTTP server's thread).
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        if let token = settings.token, !OperatorAPI.authorized(request.headers["authorization"], token: token) {
            return text(401, "a bearer token is required: Authorization: Bearer <api.token>\n",
                        headers: [("WWW-Authenticate", #"Bearer realm="locgate""#)])
        }
        guard OperatorAPI.paths.contains(request.path) else {
            return text(404, "no such path; try \(OperatorAPI.paths.joined(separator: ", "))\n")
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return text(405, "only GET and HEAD\n", headers: [("Allow", "GET, HEAD")])
        }
        let now = monitor.clock.now()
        let (components, sourceIDs) = view.withLock { $0 }
        switch request.path {
        case "/metrics":
            let body = PrometheusExposition.render(components: components, devices: monitor.devices, now: now,
                                                   version: version, startedAt: monitor.startedAt)
            return HTTPResponse(status: 200, headers: [("Content-Type", PrometheusExposition.contentType)], body: Array(body.utf8))
        case "/health":
            let report = HealthReport(sources: sourceIDs, sinks: components.filter { $0.kind == .sink }.map(\.stats),
                                      monitor: monitor, settings: settings, now: now)
            return json(report.isHealthy ? 200 : 503, report.json)
        default:
            var out = Array(#"{"positions":["#.utf8)
            for (i, d) in monitor.devices.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                PositionJSON.append(d.latest.position, to: &out)
            }
            out += Array("]}\n".utf8)
            return json(200, out)
        }
    }

    /// Whether `header` is `Bearer <token>`; the time taken depends only on the token's length.
    static func authorized(_ header: String?, token: String) -> Bool {
        let presented = Array((header ?? "").utf8)
        let prefix = Array("Bearer ".utf8)
        let scheme = presented.count >= prefix.count
            && presented[..<prefix.count].map { $0 | 0x20 } == prefix.map { $0 | 0x20 }  // the scheme is case-insensitive
        let given = scheme ? Array(presented[prefix.count...]) : []
        let expected = Array(token.utf8)
        var difference: UInt8 = given.count == expected.count ? 0 : 1
        for (i, byte) in expected.enumerated() {
            difference |= byte ^ (i < given.count ? given[i] : 0)
        }
        return scheme && difference == 0
    }

    private func text(_ status: Int, _ body: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: Array(body.utf8))
    }

    private func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")], body: body)
    }
}
