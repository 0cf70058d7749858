import DeviceIntake
import GatewayCore
import HTTPServing
import PositionEncoding
import SystemIO
import EnvironmentChecks

/// Configuration of the `http_server` source.
public struct HTTPServerSourceConfiguration: Sendable {
    /// What the requests carry.
    public enum Format: String, Sendable, CaseIterable {
        /// The OwnTracks app's HTTP mode.
        case owntracks
        /// Traccar Client / OsmAnd: query or form parameters, or the JSON body variant.
        case osmand
        /// locgate's own JSON: an array of positions, or JSON Lines (what the http sink sends).
        case json
        /// A document of the user's shape, read through `template` and `fields`.
        case template
    }

    public var listen = HTTPServerSourcePlugin.listen.defaultValue
    public var format = Format.json
    /// Only this path is served (404 elsewhere); nil serves every path.
    public var path: String?
    /// Basic users: name → password.
    public var users = CredentialList()
    /// Bearer tokens: token → the device identifier it may send for (`*`: any).
    public var tokens = CredentialList()
    public var directory = DeviceDirectoryConfiguration()
    public var limits = HTTPServer.Limits(connections: HTTPServerSourcePlugin.maxConnections.defaultValue,
                                          connectionsPerAddress: HTTPServerSourcePlugin.maxConnectionsPerAddress.defaultValue,
                                          idleTimeout: HTTPServerSourcePlugin.idleTimeout.defaultValue,
                                          requestDeadline: HTTPServerSourcePlugin.requestTimeout.defaultValue,
                                          maximumBodySize: HTTPServerSourcePlugin.maxBodyBytes.defaultValue)
    /// HTTPS instead of HTTP.
    public var tls: ServerTLSOptions?
    /// The datum of the coordinates clients send (all but `json`, whose positions name theirs).
    public var datum = HTTPServerSourcePlugin.datum.defaultValue
    /// `format: "template"`: where the positions (and the device) are, and how each is written.
    public var template: BodyTemplate?
    /// `format: "template"`: the answer once the positions are committed.
    public var responseStatus = 200
    public var responseBody: [UInt8] = Array("{}".utf8)
}

/// A name → secret map given inline or as the path of a JSON file holding one.
public struct CredentialList: Sendable {
    public var entries: [String: String] = [:]
    public var file: String?

    public var isEmpty: Bool { entries.isEmpty && file == nil }

    /// Reads `key`: an object of strings (secrets are registered for redaction) or a file path.
    static func read(_ options: inout OptionReader, _ key: String) -> CredentialList {
        var list = CredentialList()
        switch options.value(key) {
        case nil: break
        case .string?: list.file = options.filePath(key)
        case .object(let o)?:
            for (raw, value) in o {
                guard case .string(let text) = value, !raw.isEmpty else {
                    options.report("\(key).\(raw)", "expected a string")
                    continue
                }
                // users: name → password; tokens: token → device. The secret is the password,
                // or the token itself (a key, given as "${secret:NAME}").
                let name = options.substitute(raw, at: "\(key).\(raw)")
                let entry = options.substitute(text, at: "\(key).\(raw)")
                Redaction.register(key == "tokens" ? name : entry)
                list.entries[name] = entry
            }
        case let other?:
            options.report(key, "expected an object or the path of a JSON file holding one, got \(other.kindName)")
        }
        return list
    }

    /// The entries, from the file when there is one.
    func load() throws(DeviceDirectoryError) -> [String: String] {
        guard let file else { return entries }
        let value: JSONValue
        do {
            value = try JSONValue.parse(Array(try String(contentsOfFile: file, encoding: .utf8).utf8))
        } catch {
            throw DeviceDirectoryError(description: "\(file): \(FileCheck.readProblem(file) ?? "not JSON: \(error)")")
        }
        guard case .object(let o) = value else { throw DeviceDirectoryError(description: "\(file): expected an object of strings") }
        var out: [String: String] = [:]
        for (name, v) in o {
            guard case .string(let s) = v else { throw DeviceDirectoryError(description: "\(file): \(name): expected a string") }
            Redaction.register(s)
            out[name] = s
        }
        return out
    }
}

/// The `http_server` source: phone apps (OwnTracks, Traccar Client) and other gateways post
/// positions; each request is answered only once its positions were handled end to end.
public enum HTTPServerSourcePlugin: SourcePlugin {
    public static let listen = Option("listen", default: ListenAddress(host: "127.0.0.1", port: 5055),
        "Address and port; \"0.0.0.0:5055\" for phones on the network (then users or tokens are required).")
    public static let datum = Option("datum", default: Datum.wgs84, typeName: "string",
        "The datum of the coordinates the clients send: wgs84, gcj02 or bd09 (a body another locgate converted for a Chinese map). json positions name their own.",
        jsonText: { OptionText.string($0.name) },
        read: { key, reader in
            guard let text = reader.string(key) else { return nil }
            if let d = Datum(parsing: text), d.isGeographic { return d }
            reader.report(key, "expected wgs84, gcj02 or bd09, got \"\(text)\"")
            return nil
        })
    public static let maxBodyBytes = Option("max_body_bytes", default: 1 << 20, in: 1...(256 << 20),
        "Largest request body; larger ones get 413 before they are read.")
    public static let maxConnections = Option("max_connections", default: 10_000, in: 1...1_000_000,
        "Connections served at once (waiting requests hold no thread).")
    public static let maxConnectionsPerAddress = Option("max_connections_per_address", default: 256, in: 0...1_000_000,
        "Connections from one IP address at once (0: no limit; raise it behind a reverse proxy).")
    public static let requestTimeout = Option("request_timeout", default: Duration.seconds(30), minimum: .milliseconds(100),
        "A client must send its whole request within this (slow clients are cut off).")
    public static let idleTimeout = Option("idle_timeout", default: Duration.seconds(30), minimum: .seconds(1),
        "A kept-alive connection without a request for this long is closed.")

    public static let info = PluginInfo(
        type: "http_server", kind: .source,
        summary: "An HTTP(S) server for phone apps and gateways that post positions (OwnTracks, Traccar Client/OsmAnd, locgate JSON, your own template); each request is answered only once its positions were committed.",
        folder: "HTTPInput",
        options: [
            listen.spec,
            OptionSpec("format", "\"owntracks\" | \"osmand\" | \"json\" | \"template\"", required: true, "What the requests carry: OwnTracks HTTP mode, Traccar Client/OsmAnd, locgate's JSON (array or JSON Lines), or a document read through template and fields."),
            OptionSpec("path", "string", default: "any path", "Serve only this path (e.g. \"/owntracks\"); others get 404."),
            OptionSpec("users", "object or path", default: "none", "Basic authentication: user → password (${secret:…}), inline or in a JSON file. With owntracks, a user may only send as itself."),
            OptionSpec("tokens", "object or path", default: "none", "Bearer tokens (Authorization: Bearer, or ?token=): token → the device identifier it may send for, or \"*\" for any."),
        ] + DeviceDirectoryConfiguration.optionSpecs(identifier: "device identifier") + [
            datum.spec,
            OptionSpec("template", "object", default: "none", "format template: the request document, with \"$positions\" where the list of positions is and optionally \"$device\" where the device identifier is (as the http sink's body.template)."),
            OptionSpec("fields", "object", default: "whole position objects", "format template: each position's fields, name → position field or {\"from\", \"time_format\", \"zone\", \"scale\"} (as the http sink's body.fields)."),
            OptionSpec("response", "object", default: "{\"status\": 200, \"body\": {}}", "format template: the answer once the positions are committed, e.g. {\"body\": {\"resultInteger\": 1}}."),
            maxBodyBytes.spec,
            maxConnections.spec,
            maxConnectionsPerAddress.spec,
            requestTimeout.spec,
            idleTimeout.spec,
            OptionSpec("tls", "object", default: "none (plain HTTP)", "HTTPS: {\"cert_file\", \"key_file\"} (PEM)."),
        ] + ServerTLSOptions.specs,
        sample: #"{ "type": "http_server", "listen": "0.0.0.0:5055", "format": "osmand", "tokens": { "${secret:PHONE_TOKEN:-change-me}": "*" }, "devices": { "123456": "phone-ana" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> HTTPServerSourceConfiguration {
        var c = HTTPServerSourceConfiguration()
        c.listen = options.read(listen)
        let format = options.string("format")
        if let format {
            if let f = HTTPServerSourceConfiguration.Format(rawValue: format) {
                c.format = f
            } else {
                options.report("format", "expected one of owntracks, osmand, json, template, got \"\(format)\"")
            }
        } else if !options.has("format") {
            options.report("format", "required option is missing")
        }
        if let path = options.string("path") {
            if path.hasPrefix("/") { c.path = path } else { options.report("path", "must start with /, got \"\(path)\"") }
        }
        c.users = CredentialList.read(&options, "users")
        c.tokens = CredentialList.read(&options, "tokens")
        c.directory = DeviceDirectoryConfiguration.read(&options)
        c.datum = options.read(datum)
        if c.format == .template {
            c.template = BodyTemplate.read(&options)
            if var response = options.object("response") {
                c.responseStatus = response.int("status", default: 200, in: 200...299)
                if let body = response.value("body") {
                    var bytes: [UInt8] = []
                    JSONWriter.append(body, to: &bytes)
                    c.responseBody = bytes
                }
                response.finish()
            }
        } else {
            for key in ["template", "fields", "response"] where options.has(key) {
                options.report(key, "only used with \"format\": \"template\"")
            }
        }
        c.limits.maximumBodySize = options.read(maxBodyBytes)
        c.limits.connections = options.read(maxConnections)
        c.limits.connectionsPerAddress = options.read(maxConnectionsPerAddress)
        c.limits.requestDeadline = options.read(requestTimeout)
        c.limits.idleTimeout = options.read(idleTimeout)
        if var tls = options.object("tls") {
            c.tls = ServerTLSOptions.read(&tls)
            tls.finish()
        }
        if !c.listen.isLoopback && c.users.isEmpty && c.tokens.isEmpty {
            options.report("listen", "users or tokens are required when listen is not a loopback address (\(c.listen)): without them anyone who reaches the port can post positions")
        }
        return c
    }

    /// OwnTracks apps take commands in their answers; the other formats carry none and need no
    /// command store (when another source opens one, their devices are known to it, so a command
    /// to one is refused with a reason).
    public static func carriesCommands(_ configuration: HTTPServerSourceConfiguration) -> Bool { configuration.format == .owntracks }

    public static func claims(of configuration: HTTPServerSourceConfiguration) -> [String] {
        configuration.listen.port == 0 ? [] : ["tcp port \(configuration.listen.port)"]
    }

    public static func checkEnvironment(_ configuration: HTTPServerSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings = configuration.directory.environmentFindings(context: context)
        findings += ListenerConfiguration.listenFindings(configuration.listen, context: context)
        for (key, list) in [("users", configuration.users), ("tokens", configuration.tokens)] {
            do { _ = try list.load() } catch { findings.append(context.error(key, error.description)) }
        }
        for (key, file) in configuration.tls?.files ?? [] {
            if let problem = FileCheck.readProblem(file) { findings.append(context.error(key, "\(file): \(problem)")) }
        }
        return findings
    }

    public static func makeSource(_ configuration: HTTPServerSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        HTTPServerSource(configuration: configuration, context: context)
    }
}
