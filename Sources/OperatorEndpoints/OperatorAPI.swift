import GatewayCore
import Geodesy
import HTTPServing
import Locking
import MapRendering
import PositionEncoding
import Synchronization

/// The operator HTTP API: `GET /metrics`, `/health` and `/positions/latest` over a running
/// pipeline, and the live map: `GET /` (the page) and `GET /events` (its Server-Sent Events).
///
/// Build a ``PipelineActivity`` first and give it to the pipeline as its observer, then make the
/// API from the pipeline's statistics and ``start(logger:)`` it; ``stop()`` after the pipeline ended.
///
/// Location data is personal: with a token every request must carry `Authorization: Bearer
/// <token>` (compared in constant time), or gets 401; validation refuses a non-loopback address
/// without one. A browser cannot put a header on an `EventSource`, so `/` and `/events` also take
/// the token as `?token=` (the page passes its own query string on to `/events`).
public final class OperatorAPI: Sendable {
    public static let paths = ["/", "/events", "/metrics", "/health", "/positions/latest"]
    /// Live map event streams served at once; more get 503. A stream costs no thread, but each
    /// is woken for every batch and once a second, and renders a snapshot when it starts.
    public static let maximumLiveStreams = 16
    /// The HTTP server's limits besides the connection counts (`api.limits`): an idle connection
    /// goes after 10 s; a request must be complete 15 s after its connection opened or its
    /// previous answer went (a scraper's or a probe's takes milliseconds; a slow-loris client is
    /// cut off; longer than the idle timeout, so a kept-alive connection left idle is closed as
    /// idle, not counted as late); bodies up to 256 KiB are read (and then refused with 405: every
    /// endpoint is GET), larger ones get 413 unread.
    public static func serverLimits(_ settings: PipelineConfiguration.API) -> HTTPServer.Limits {
        HTTPServer.Limits(connections: settings.maxConnections, connectionsPerAddress: settings.maxConnectionsPerAddress,
                          idleTimeout: .seconds(10), requestDeadline: .seconds(15), maximumBodySize: 256 * 1024)
    }

    public let settings: PipelineConfiguration.API
    public let monitor: PipelineActivity
    /// The gateway's commands to devices (`/devices/{device}/commands`, `/commands/{id}`); nil: none.
    let commands: (any CommandCenter)?
    /// The components served, replaced when a reload changes the pipeline.
    private let view: Locked<(components: [MonitoredComponent], sourceIDs: [String], scene: LiveMapScene, generation: Int)>
    private let version: String
    private let server = Locked<HTTPServer?>(nil)
    /// Every position and fence on the live map is converted into this datum (`api.map.datum`).
    let displayDatum: ChinaDatums.Datum
    private let liveStreams = Locked(0)
    private let stopping = Atomic<Bool>(false)
    /// The live map page, made on the first request (it inlines Leaflet, about 150 kB).
    private let page = Locked<[UInt8]?>(nil)

    /// `stats` are the pipeline's `componentStats`; `configuration` gives each its kind and type.
    public init(settings: PipelineConfiguration.API, configuration: PipelineConfiguration, stats: [ComponentStats],
                monitor: PipelineActivity, version: String, commands: (any CommandCenter)? = nil) {
        self.settings = settings
        self.commands = commands
        self.monitor = monitor
        self.version = version
        let display = MapProjection.datum(named: settings.mapDatum) ?? .wgs84
        displayDatum = display
        let v = OperatorAPI.view(configuration, stats)
        view = Locked((v.components, v.sourceIDs, LiveMapScene(configuration: configuration, display: display), 0))
    }

    /// Serves the components of a reloaded pipeline (`stats` are its new `componentStats`); live
    /// maps get a new snapshot with the new fences and components.
    public func update(configuration: PipelineConfiguration, stats: [ComponentStats]) {
        let v = OperatorAPI.view(configuration, stats)
        let scene = LiveMapScene(configuration: configuration, display: displayDatum)
        view.withLock { $0 = (v.components, v.sourceIDs, scene, $0.generation + 1) }
        monitor.wake()
    }

    /// What a live map stream draws besides positions, and its version (bumped by a reload).
    var liveScene: (LiveMapScene, [MonitoredComponent], Int) {
        view.withLock { ($0.scene, $0.components, $0.generation) }
    }

    var isStopping: Bool { stopping.load(ordering: .sequentiallyConsistent) }

    func liveStreamClosed() { liveStreams.withLock { $0 -= 1 } }

    private static func view(_ configuration: PipelineConfiguration, _ stats: [ComponentStats]) -> (components: [MonitoredComponent], sourceIDs: [String]) {
        let byPath = Dictionary(configuration.components.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        return (stats.compactMap { s in byPath[s.id].map { MonitoredComponent(stats: s, kind: $0.kind, type: $0.type) } },
                configuration.sources.map(\.id))
    }

    /// Binds the configured address and serves until ``stop()``; returns the port bound.
    @discardableResult
    public func start(logger: Logger) throws(HTTPServerError) -> Int {
        var tls: (String, String)?
        if let files = settings.tls {
            guard HTTPServer.supportsTLS else { throw HTTPServerError(description: "this libmicrohttpd was built without TLS; remove api.tls or install one with it") }
            tls = (files.certFile, files.keyFile)
        }
        let s = try HTTPServer(host: settings.host, port: settings.port, tls: tls, limits: OperatorAPI.serverLimits(settings)) { [self] request, responder in
            responder.respond(handle(request))
        }
        server.withLock { $0 = s }
        var shown = settings
        shown.port = s.port
        logger.info("serving \(tls == nil ? "http" : "https")://\(shown.listen) \(OperatorAPI.paths.joined(separator: " "))\(settings.token == nil ? "" : " (bearer token required)")")
        return s.port
    }

    /// The HTTP server's refusals and connections so far; nil when not serving.
    public var serverStatistics: HTTPServer.Statistics? { server.withLock { $0?.statistics } }

    /// Stops serving: answers in progress finish, live map streams end, the socket closes.
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        monitor.wake()
        let s = server.withLock { s in
            defer { s = nil }
            return s
        }
        // The server stops here, outside the lock: its thread may be answering a request, which
        // reads the lock.
        s?.stop()
        _ = consume s
    }

    // MARK: - Requests

    /// The answer to one request (called on the HTTP server's event thread: it never waits).
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard let caller = caller(of: request) else {
            let how = request.path == "/" || request.path == "/events" ? " (or ?token=<api.token> for the live map)" : ""
            return text(401, "a bearer token is required: Authorization: Bearer <api.token>\(how)\n",
                        headers: [("WWW-Authenticate", #"Bearer realm="locgate""#)])
        }
        if let answer = handleCommands(request, caller: caller) { return answer }
        guard OperatorAPI.paths.contains(request.path) else {
            return text(404, "no such path; try \(OperatorAPI.paths.joined(separator: ", "))\(commands == nil ? "" : ", /devices/{device}/commands, /commands/{id}")\n")
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return text(405, "only GET and HEAD\n", headers: [("Allow", "GET, HEAD")])
        }
        let now = monitor.clock.now()
        let (components, sourceIDs) = view.withLock { ($0.components, $0.sourceIDs) }
        switch request.path {
        case "/":
            guard let html = livePage() else {
                return text(503, "the live map needs Leaflet from Debian's libjs-leaflet (apt-get install libjs-leaflet)\n")
            }
            return HTTPResponse(status: 200, headers: [
                ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"), ("Referrer-Policy", "no-referrer"),
                // The page loads nothing: everything is inline, and it only connects back here.
                ("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'"),
            ], body: html)
        case "/events":
            return liveEvents(head: request.method == "HEAD")
        case "/metrics":
            let body = PrometheusExposition.render(components: components, devices: monitor.devices, now: now,
                                                   version: version, startedAt: monitor.startedAt, server: serverStatistics)
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

    /// The live map page, made once.
    private func livePage() -> [UInt8]? {
        page.withLock { cached in
            if let cached { return cached }
            guard let leaflet = try? LeafletAssets() else { return nil }
            let html = Array(LiveMapPage.render(leaflet: leaflet).utf8)
            cached = html
            return html
        }
    }

    /// A Server-Sent Events stream for a live map, or 503 when ``maximumLiveStreams`` are open.
    private func liveEvents(head: Bool) -> HTTPResponse {
        let headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")]
        if head { return HTTPResponse(status: 200, headers: headers) }
        let admitted = liveStreams.withLock { n in
            guard n < OperatorAPI.maximumLiveStreams else { return false }
            n += 1
            return true
        }
        guard admitted else {
            return text(503, "too many live map streams (\(OperatorAPI.maximumLiveStreams)); close one\n", headers: [("Retry-After", "30")])
        }
        // Idle means no byte for four heartbeats: the client stopped reading.
        return HTTPResponse(status: 200, headers: headers, stream: LiveMapStream(api: self), idleTimeout: LiveMapStream.heartbeat * 4)
    }

    /// Who sent the request: the token it carries (`api.token`, named "token", or one of
    /// `api.tokens`), or "api" when the API has no token; nil when it carries none of them.
    func caller(of request: HTTPRequest) -> APICaller? {
        guard settings.token != nil || !settings.tokens.isEmpty else { return APICaller(name: "api", commandTypes: nil) }
        if let token = settings.token, OperatorAPI.authorized(request, token: token) { return APICaller(name: "token", commandTypes: nil) }
        for named in settings.tokens where OperatorAPI.authorized(request, token: named.token) {
            return APICaller(name: named.name, commandTypes: named.commandTypes)
        }
        return nil
    }

    /// Whether the request carries the token: `Authorization: Bearer`, or for the live map
    /// (`/`, `/events`) a `token` query argument.
    static func authorized(_ request: HTTPRequest, token: String) -> Bool {
        if authorized(request.headers["authorization"], token: token) { return true }
        guard request.path == "/" || request.path == "/events", let given = request.query["token"] else { return false }
        return matches(Array(given.utf8), token: token)
    }

    /// Whether `header` is `Bearer <token>`; the time taken depends only on the token's length.
    static func authorized(_ header: String?, token: String) -> Bool {
        let presented = Array((header ?? "").utf8)
        let prefix = Array("Bearer ".utf8)
        let scheme = presented.count >= prefix.count
            && presented[..<prefix.count].map { $0 | 0x20 } == prefix.map { $0 | 0x20 }  // the scheme is case-insensitive
        let given = scheme ? Array(presented[prefix.count...]) : []
        return scheme && matches(given, token: token)
    }

    /// Compares in a time that depends only on the token's length.
    static func matches(_ given: [UInt8], token: String) -> Bool {
        let expected = Array(token.utf8)
        var difference: UInt8 = given.count == expected.count ? 0 : 1
        for (i, byte) in expected.enumerated() {
            difference |= byte ^ (i < given.count ? given[i] : 0)
        }
        return difference == 0
    }

    func text(_ status: Int, _ body: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: Array(body.utf8))
    }

    func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")], body: body)
    }
}
