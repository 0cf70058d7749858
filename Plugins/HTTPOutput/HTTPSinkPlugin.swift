import Foundation
import GatewayCore
import DeliveryEngine
import PositionEncoding
import SystemIO
import EnvironmentChecks

/// The `http` sink: batches positions to an HTTP endpoint from a durable (SQLite) or memory queue.
public enum HTTPSinkPlugin: SinkPlugin {
    public static let method = Option("method", default: HTTPSinkConfiguration.Method.post,
        "Request method.")
    public static let timeout = Option("timeout", default: Duration.seconds(30), minimum: .milliseconds(100),
        "Per-request timeout, connection included; a timeout is retried.")
    public static let connectTimeout = Option("connect_timeout", default: Duration.seconds(10), minimum: .milliseconds(100),
        "Longest wait for a connection (TCP, proxy and TLS handshake); retried.")
    public static let gzip = Option("gzip", default: false,
        "Compress bodies with gzip (Content-Encoding: gzip).")
    public static let maxPositions = Option("batch.max_positions", default: 500, in: 1...1_000_000,
        "Send when this many positions are queued (and never more per request).")
    public static let maxBytes = Option("batch.max_bytes", default: 1_000_000, in: 1024...1_000_000_000,
        "Send when the queued JSON reaches this many bytes; no body exceeds it (before gzip) unless one position alone does.")
    public static let interval = Option("batch.interval", default: Duration.seconds(10), minimum: .milliseconds(10),
        "Send what is queued this long after the first unsent position arrived, even if the batch is not full.")
    public static let bodyFormat = Option("body.format", choices: ["json_array", "jsonl", "geojson", "template"], default: "json_array",
        "Body encoding; template uses body.template and body.fields.")
    public static let onMismatch = Option("success.on_mismatch", default: HTTPSinkConfiguration.OnMismatch.retry,
        "What a 2xx answer failing success.json means.")
    public static let retryInitial = Option("retry.initial", default: Duration.seconds(1), minimum: .milliseconds(1),
        "First retry delay; doubles per attempt (±20% jitter). Retry-After is honoured when longer.")
    public static let retryMax = Option("retry.max", default: Duration.seconds(60), minimum: .milliseconds(1),
        "Longest retry delay.")
    public static let retryMaxAttempts = Option("retry.max_attempts", default: 0, in: 0...1_000_000,
        "Attempts before a batch goes to the dead letters; 0 retries forever.")

    public static let info = PluginInfo(
        type: "http", kind: .sink,
        summary: "Uploads positions in batches over HTTP(S) from a durable SQLite queue; deletes them only after the server accepted them.",
        folder: "HTTPOutput",
        options: [
            OptionSpec("url", "string", required: true, "Endpoint (http:// or https://); ${ENV} allowed."),
            method.spec,
            OptionSpec("headers", "object", default: "{}", "Extra request headers; values may use ${ENV}."),
            OptionSpec("auth", "object", default: "none", "{\"bearer\": TOKEN} or {\"user\": U, \"password\": P} (basic); values may use ${ENV}."),
            timeout.spec,
            connectTimeout.spec,
        ] + ClientTLSOptions.specs(peer: "the server") + [
            OptionSpec("proxy", "string", default: "from the environment", "Proxy URL (http://, https://, socks5://, socks5h://, with user:password@ if needed); by default libcurl reads https_proxy, http_proxy, all_proxy and no_proxy; \"\" uses no proxy."),
            gzip.spec,
            maxPositions.spec,
            maxBytes.spec,
            interval.spec,
            bodyFormat.spec,
            OptionSpec("body.template", "JSON", default: "\"$positions\"", "template: the JSON document sent; the string \"$positions\" marks where the array of records goes. Strings may use ${ENV}."),
            OptionSpec("body.fields", "object", default: "whole position objects", "template: output field name → source field (\"lat\") or {\"from\", \"time_format\", \"zone\", \"scale\", \"decimals\"} or {\"value\": constant}. Fields not listed are dropped."),
            OptionSpec("success.json", "object", default: "none", "Predicate a 2xx answer's JSON must pass: {\"path\": \"code\", \"equals\" | \"not_equals\" | \"greater_than\" | \"less_than\": value}."),
            onMismatch.spec,
            retryInitial.spec,
            retryMax.spec,
            retryMaxAttempts.spec,
        ] + OutboxOptions.specs,
        sample: #"{ "type": "http", "inputs": ["receiver"], "url": "https://example.org/api/track", "headers": { "X-Device": "${DEVICE_ID:-gw1}" }, "auth": { "bearer": "${TRACK_TOKEN:-secret}" }, "batch": { "max_positions": 500, "interval": "20s" }, "queue": { "path": "upload.sqlite" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> HTTPSinkConfiguration {
        var c = HTTPSinkConfiguration()
        c.url = options.requiredString("url") ?? ""
        Redaction.registerCredentials(inURL: c.url)
        if !c.url.isEmpty {
            let lower = c.url.lowercased()
            if URL(string: c.url) == nil || !(lower.hasPrefix("http://") || lower.hasPrefix("https://")) {
                options.report("url", "expected an http:// or https:// URL, got \"\(c.url)\"")
            }
        }
        c.method = options.read(method)
        if let headers = options.stringMap("headers") {
            c.headers = headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            for (name, value) in c.headers where Redaction.isSecretName(name) { Redaction.register(value) }
        }
        if var auth = options.object("auth") {
            if let token = auth.secretString("bearer") {
                c.authorization = "Bearer \(token)"
                if auth.has("user") || auth.has("password") { auth.report("", "give either bearer or user and password") }
            } else if let user = auth.string("user") {
                let password = auth.secretString("password") ?? ""
                c.authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
                // The encoded form is as good as the password to whoever reads it.
                if !password.isEmpty, let a = c.authorization { Redaction.register(a) }
            } else {
                _ = auth.has("password")
                auth.report("", "expected {\"bearer\": TOKEN} or {\"user\": U, \"password\": P}")
            }
            auth.finish()
        }
        c.timeout = options.read(timeout)
        c.connectTimeout = options.read(connectTimeout)
        if var tls = options.object("tls") {
            c.tls = ClientTLSOptions.read(&tls, checkFiles: false)
            tls.finish()
        }
        if let proxy = options.string("proxy") {
            Redaction.registerCredentials(inURL: proxy)
            let schemes = ["http://", "https://", "socks4://", "socks4a://", "socks5://", "socks5h://"]
            if !proxy.isEmpty && !schemes.contains(where: { proxy.lowercased().hasPrefix($0) }) {
                options.report("proxy", "expected a URL starting with \(schemes.joined(separator: ", ")) or \"\" for no proxy, got \"\(proxy)\"")
            }
            c.proxy = proxy
        }
        c.gzip = options.read(gzip)

        if var batch = options.object("batch") {
            c.maxPositions = batch.read(maxPositions)
            c.maxBytes = batch.read(maxBytes)
            c.interval = batch.read(interval)
            batch.finish()
        }

        if var body = options.object("body") {
            c.body = readBody(&body)
            body.finish()
        }

        if var success = options.object("success") {
            if var json = success.object("json") {
                c.successPredicate = readPredicate(&json)
                json.finish()
            }
            c.onMismatch = success.read(onMismatch)
            success.finish()
        }

        if var retry = options.object("retry") {
            c.retryInitial = retry.read(retryInitial)
            c.retryMax = retry.read(retryMax)
            c.retryMaxAttempts = retry.read(retryMaxAttempts)
            if c.retryMax < c.retryInitial { retry.report("max", "must be at least retry.initial (\(DurationText.format(c.retryInitial)))") }
            retry.finish()
        }

        c.queue = OutboxOptions.read(&options)
        return c
    }

    static func readBody(_ body: inout OptionReader) -> BodyFormat {
        let format = body.read(bodyFormat)
        if format != "template" { BodyTemplate.reportUnused(&body, format: "template") }
        switch format {
        case "jsonl": return .jsonl
        case "geojson": return .geojson
        case "template": break
        default: return .jsonArray
        }
        return .template(BodyTemplate.read(&body))
    }

    static func readPredicate(_ json: inout OptionReader) -> ResponsePredicate? {
        let path = json.requiredString("path")
        var tests: [ResponsePredicate.Test] = []
        if let v = json.value("equals") { tests.append(.equals(v)) }
        if let v = json.value("not_equals") { tests.append(.notEquals(v)) }
        if json.has("greater_than") { if let n = json.double("greater_than") { tests.append(.greaterThan(n)) } }
        if json.has("less_than") { if let n = json.double("less_than") { tests.append(.lessThan(n)) } }
        guard tests.count == 1 else {
            json.report("", "give exactly one of \(ResponsePredicate.testNames.joined(separator: ", "))")
            return nil
        }
        guard let path else { return nil }
        return ResponsePredicate(path: path.split(separator: ".").map(String.init), test: tests[0])
    }

    public static func makeSink(_ configuration: HTTPSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        for (option, path) in configuration.tls.files {
            if access(path, R_OK) != 0 {
                throw HTTPSinkError(message: "\(option) \(path): \(String(cString: strerror(errno)))")
            }
        }
        if !configuration.tls.verify {
            context.logger.warning("tls.verify is false: any server certificate is accepted, so the positions may go to an impostor")
        }
        return HTTPSink(configuration: configuration, context: context, outbox: try OutboxOptions.open(configuration.queue, context: context))
    }
}

extension HTTPSinkPlugin {
    /// TLS files readable and the queue usable (errors: the sink would not start); the server,
    /// or the proxy when one is set, accepting a TCP connection (a warning: the sink retries).
    public static func checkEnvironment(_ configuration: HTTPSinkConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings: [EnvironmentFinding] = []
        for (option, path) in configuration.tls.files {
            if let problem = FileCheck.readProblem(path) { findings.append(context.error(option, problem)) }
        }
        findings += OutboxOptions.checkEnvironment(configuration.queue, context: context)
        let viaProxy = configuration.proxy.map { !$0.isEmpty } ?? false
        let target = viaProxy ? configuration.proxy ?? "" : configuration.url
        if let url = URL(string: target), let host = url.host {
            let scheme = url.scheme?.lowercased()
            let port = url.port ?? (scheme == "https" ? 443 : scheme?.hasPrefix("socks") == true ? 1080 : 80)
            if let problem = PeerCheck.tcpProblem(host: host, port: port, timeout: context.peerTimeout) {
                findings.append(context.warning(viaProxy ? "proxy" : "url", "\(viaProxy ? "the proxy" : "the server") is not reachable now: \(problem); positions wait in the queue until it is"))
            }
        }
        return findings
    }
}
