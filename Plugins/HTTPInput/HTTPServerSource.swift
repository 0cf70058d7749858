import DeviceIntake
import Foundation
import GatewayCore
import HTTPServing
import Locking

/// Serves phone apps and gateways that post positions.
///
///     request ─▶ path, method ─▶ credentials ─▶ decode (format) ─▶ devices ─▶ inbox ─▶ pipeline
///        │              │             │               │                 │                │
///        └─ 404 / 405 ──┴── 401 ──────┴── 400 / 415 ──┴──── 403 ────────┘   handled ─▶ 200
///
/// A request whose positions were taken waits, suspended (no thread), until the pipeline says
/// every position was handled end to end; only then is it answered with the format's success,
/// which is what the app deletes its copy on. A request left unanswered at shutdown gets 503,
/// so the app sends it again. While the inbox is full, requests get 503 with `Retry-After`.
struct HTTPServerSource: PositionSource {
    let configuration: HTTPServerSourceConfiguration
    let context: ComponentContext

    func run(output: SourceOutput) async throws {
        let handler: RequestHandler
        do {
            handler = try RequestHandler(configuration: configuration, context: context)
        } catch {
            throw HTTPServerSourceError(description: "\(error)")
        }
        let server: HTTPServer
        do {
            server = try HTTPServer(host: configuration.listen.host, port: configuration.listen.port, tls: configuration.tls.map { ($0.certFile, $0.keyFile) },
                                    limits: configuration.limits) { request, responder in handler.handle(request, responder) }
        } catch {
            throw HTTPServerSourceError(description: "\(error)")
        }
        let stats = context.stats
        stats.gauge("connections.open") { server.statistics.open }
        stats.gauge("connections.refused.limit") { server.statistics.refusedLimit }
        stats.gauge("connections.refused.per_address") { server.statistics.refusedPerAddress }
        stats.gauge("requests.deadline_closed") { server.statistics.deadlineClosed }
        stats.gauge("requests.too_large") { server.statistics.tooLarge }
        if let commands = context.commands {
            // OwnTracks apps read commands in their answers; the other formats carry none.
            let inbox = handler.inbox
            commands.register(source: context.id, types: configuration.format == .owntracks ? OwnTracksCommandLink.types : []) { event in
                if let status = event.event?.status { stats.count("commands.\(status)") }
                inbox.put(DeviceInbox.Delivery(positions: [event]) {})
            }
            commands.knows(devices: handler.deviceNames, source: context.id)
        }
        context.logger.info("listening for \(configuration.format.rawValue) requests on \(configuration.tls == nil ? "http" : "https")://\(configuration.listen.description.replacingOccurrences(of: ":\(configuration.listen.port)", with: ":\(server.port)"))\(configuration.path ?? "/")")
        await handler.inbox.pump(into: output)
        handler.inbox.close()
        server.stop()
        throw CancellationError()
    }
}

/// The source could not start (a port in use, unreadable TLS files, a credentials file).
struct HTTPServerSourceError: Error, CustomStringConvertible {
    var description: String
}

/// Answers one request at most once; answers 503 when dropped unanswered (the pipeline stopped
/// before the positions were handled), so the client sends them again.
final class PendingAnswer: Sendable {
    private let responder: HTTPResponder

    init(_ responder: HTTPResponder) { self.responder = responder }

    func respond(_ response: HTTPResponse) { responder.respond(response) }

    deinit {
        if !responder.hasResponded {
            responder.respond(HTTPResponse(status: 503, headers: [("Retry-After", "5"), ("Content-Type", "text/plain")],
                                           body: Array("stopping; send it again\n".utf8)))
        }
    }
}

/// Everything a request needs, shared by the server's thread.
final class RequestHandler: Sendable {
    let configuration: HTTPServerSourceConfiguration
    let context: ComponentContext
    let inbox = DeviceInbox()
    private let devices: DeviceDirectory
    private let users: [String: String]
    private let tokens: [String: String]
    private let template: TemplateReader?
    private let logLimit = Locked(LogRateLimit())
    /// OwnTracks: each device's commands waiting for its next answer.
    private let commandLinks = Locked<[String: OwnTracksCommandLink]>([:])

    var deviceNames: [String] { devices.names }

    init(configuration: HTTPServerSourceConfiguration, context: ComponentContext) throws {
        self.configuration = configuration
        self.context = context
        devices = try DeviceDirectory(configuration.directory, logger: context.logger)
        users = try configuration.users.load()
        tokens = try configuration.tokens.load()
        template = configuration.template.map(TemplateReader.init)
    }

    private var needsCredentials: Bool { !users.isEmpty || !tokens.isEmpty }

    func handle(_ request: HTTPRequest, _ responder: HTTPResponder) {
        do throws(RequestRejection) {
            try take(request, responder)
        } catch {
            context.stats.count("requests.\(error.counter)")
            var headers = [("Content-Type", "text/plain; charset=utf-8")]
            if error.status == 401 {
                headers.append(("WWW-Authenticate", users.isEmpty ? "Bearer realm=\"locgate\"" : "Basic realm=\"locgate\""))
            } else if error.status == 405 {
                headers.append(("Allow", configuration.format == .osmand ? "GET, POST" : "POST"))
            } else if error.status == 503 {
                headers.append(("Retry-After", "1"))
            }
            responder.respond(HTTPResponse(status: error.status, headers: headers, body: Array((error.reason + "\n").utf8)))
        }
    }

    private func take(_ request: HTTPRequest, _ responder: HTTPResponder) throws(RequestRejection) {
        if let path = configuration.path, request.path != path {
            throw RequestRejection(404, "not_found", "not found; positions go to \(path)")
        }
        let methods = configuration.format == .osmand ? ["GET", "POST"] : ["POST"]
        guard methods.contains(request.method) else {
            throw RequestRejection(405, "method", "\(request.method.prefix(16)) is not allowed; use \(methods.joined(separator: " or "))")
        }
        let (basicUser, tokenDevice) = try authenticate(request)
        if inbox.isFull { throw RequestRejection(503, "busy", "busy; send it again shortly") }
        let now = context.clock.now()
        var decoded: DecodedRequest
        switch configuration.format {
        case .owntracks:
            decoded = try RequestFormats.owntracks(request, source: context.id, basicUser: basicUser)
        case .osmand:
            decoded = try RequestFormats.osmand(request, source: context.id, now: now)
        case .json:
            decoded = try RequestFormats.json(request, source: context.id, fallbackDevice: tokenDevice == "*" ? nil : tokenDevice)
        case .template:
            guard let template else { throw RequestRejection(500, "configuration", "no template") }
            let (device, positions) = try template.read(try RequestFormats.parseJSON(request.body), source: context.id)
            decoded = DecodedRequest()
            for p in positions {
                guard let id = device ?? p.device ?? (tokenDevice == "*" ? nil : tokenDevice) else {
                    throw RequestRejection(400, "no_device", "no device: put \"$device\" in the template or map a field to device")
                }
                decoded.positions.append((id, p))
            }
            if decoded.positions.isEmpty { decoded.skipped = "empty" }
        }
        if let kind = decoded.skipped {
            context.stats.count("messages.\(kind)")
            responder.respond(success(count: 0))
            return
        }
        // Who sent them: every device must be allowed (and be the token's, for a device token).
        var entries: [String: DeviceEntry] = [:]
        for (identifier, _) in decoded.positions where entries[identifier] == nil {
            if let tokenDevice, tokenDevice != "*", tokenDevice != identifier {
                throw RequestRejection(403, "wrong_device", "this token may not send for \(identifier.prefix(64))")
            }
            guard let entry = devices.lookup(identifier, now: now.milliseconds) else {
                context.stats.count("devices.unknown")
                warn("device \(identifier)", "refused unknown device \(identifier.prefix(64)) from \(request.peerAddress): add it to devices (or set unknown_devices: \"accept\")")
                throw RequestRejection(403, "unknown_device", "unknown device \(identifier.prefix(64))")
            }
            entries[identifier] = entry
        }
        // locgate's JSON names its datum; the others are in the datum the clients are set to.
        if configuration.format != .json && configuration.datum != .wgs84 {
            for i in decoded.positions.indices { decoded.positions[i].position.datum = configuration.datum }
        }
        var stamp = PositionStamp(source: context.id)
        var positions: [Position] = []
        positions.reserveCapacity(decoded.positions.count)
        // Stamped per device, in the request's order: a repeated time within one device's
        // positions gets the same suffix when the request is sent again.
        for identifier in entries.keys.sorted() {
            guard let entry = entries[identifier] else { continue }
            var group = decoded.positions.filter { $0.identifier == identifier }.map(\.position)
            stamp.stamp(&group, as: entry)
            positions += group
        }
        let count = positions.count
        let since = ContinuousClock.now
        let stats = context.stats
        let links = commandLinks(for: entries.values.map(\.name))
        // Made only now: dropped unanswered (at shutdown), it answers 503 by itself.
        let answer = PendingAnswer(responder)
        let accepted = inbox.put(DeviceInbox.Delivery(positions: positions) { [self] in
            answer.respond(success(count: count, commands: links))
            stats.count("acks.sent")
            let waited = ContinuousClock.now - since
            stats.count("ack_latency_ms.sum", by: Int(waited.milliseconds))
        })
        guard accepted else { throw RequestRejection(503, "stopping", "stopping; send it again") }
        stats.count("requests.accepted")
    }

    /// OwnTracks with commands: each device's link, told the device is here (its waiting commands
    /// come into the link); none for the other formats.
    private func commandLinks(for devices: [String]) -> [OwnTracksCommandLink] {
        guard configuration.format == .owntracks, let commands = context.commands else { return [] }
        return devices.map { device in
            let link = commandLinks.withLock { links in
                if let link = links[device] { return link }
                let link = OwnTracksCommandLink()
                links[device] = link
                return link
            }
            commands.connected(device, source: context.id, link: link)
            return link
        }
    }

    /// The format's answer once the positions are committed; an OwnTracks answer carries the
    /// commands waiting for its devices (each then delivered).
    private func success(count: Int, commands links: [OwnTracksCommandLink] = []) -> HTTPResponse {
        switch configuration.format {
        case .owntracks:
            // The app shows what the array holds (friends, cards, commands).
            var messages: [JSONValue] = []
            for link in links {
                for command in link.take() {
                    if let message = OwnTracksCommandLink.message(command) {
                        messages.append(message)
                        context.commands?.answered(command.id, outcome: .delivered)
                    } else {
                        context.commands?.answered(command.id, outcome: .failed("OwnTracks cannot carry it"))
                    }
                }
            }
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(JSONValue.array(messages).jsonText.utf8))
        case .osmand:
            return HTTPResponse(status: 200)
        case .json:
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array("{\"accepted\":\(count)}".utf8))
        case .template:
            return HTTPResponse(status: configuration.responseStatus, headers: [("Content-Type", "application/json")], body: configuration.responseBody)
        }
    }

    /// The Basic user and the token's device, when the request carries valid ones; throws 401
    /// when credentials are configured and the request has none that match.
    private func authenticate(_ request: HTTPRequest) throws(RequestRejection) -> (user: String?, tokenDevice: String?) {
        guard needsCredentials else { return (nil, nil) }
        let authorization = request.headers["authorization"] ?? ""
        if authorization.lowercased().hasPrefix("basic "), !users.isEmpty,
           let data = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
           let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") {
            let user = String(text[..<colon]), password = String(text[text.index(after: colon)...])
            if let expected = users[user], RequestHandler.same(expected, password) { return (user, nil) }
        }
        var token: String?
        if authorization.lowercased().hasPrefix("bearer ") { token = String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces) }
        if token == nil { token = request.query["token"] }
        if let token, let match = tokens.first(where: { RequestHandler.same($0.key, token) }) { return (nil, match.value) }
        warn("auth \(request.peerAddress)", "refused a request from \(request.peerAddress) without valid credentials")
        throw RequestRejection(401, "unauthorized", "credentials required")
    }

    /// Compares secrets in time that does not depend on where they differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = x.count ^ y.count
        for i in 0..<max(x.count, y.count) { diff |= Int((i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)) }
        return diff == 0
    }

    private func warn(_ key: String, _ message: String) {
        let now = context.clock.now().milliseconds
        if let suppressed = logLimit.withLock({ $0.allow(key, now: now) }) {
            context.logger.warning(message + LogRateLimit.suffix(suppressed))
        }
    }
}
