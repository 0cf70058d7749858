import Foundation
import GatewayCore
import SystemIO

/// `locgate command send|list|show|cancel CONFIG …`: commands to devices, through the running
/// gateway's operator API (`api` in CONFIG: its address and token).
///
/// The API is spoken with a small HTTP/1.1 client on SystemIO's sockets: one request per
/// connection (`Connection: close`), plain HTTP. An API served over TLS (`api.tls`) is refused with
/// the curl command that does the same; libcurl is the sinks' (HTTPOutput), and the CLI does not
/// link a plugin.
enum CommandCommand {
    static let usage = """
    usage: locgate command send CONFIG DEVICE TYPE [NAME=VALUE…]   e.g. set_interval interval=20s ttl=2h
           locgate command list CONFIG DEVICE
           locgate command show CONFIG ID
           locgate command cancel CONFIG ID
    The token is api.token of CONFIG, or --token TOKEN, or LOCGATE_API_TOKEN.
    """

    static func run(_ arguments: [String], registry: PluginRegistry) async {
        var args = arguments
        let given = LocgateCommand.takeOption("--token", from: &args)
        guard let action = args.first, args.count >= 3 else { LocgateCommand.fail(usage, code: 2) }
        let config = LocgateCommand.load(args[1], registry: registry)
        guard let api = config.api else {
            LocgateCommand.fail("\(args[1]): has no api: the running gateway's commands are reached through its operator API", code: 1)
        }
        let token = given ?? ProcessInfo.processInfo.environment["LOCGATE_API_TOKEN"] ?? api.token
        if api.tls != nil {
            LocgateCommand.fail("the API is served over TLS, which this command does not speak; with curl: curl -H 'Authorization: Bearer …' https://\(api.listen)/…", code: 1)
        }
        let request: (method: String, path: String, body: String?)
        switch (action, args.count) {
        case ("send", 4...):
            var members: [(String, JSONValue)] = [("type", .string(args[3]))]
            for pair in args.dropFirst(4) {
                guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else { LocgateCommand.fail("\(pair): expected NAME=VALUE\n\(usage)", code: 2) }
                let name = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
                members.append((name, name == "attempts" ? (Double(value).map(JSONValue.number) ?? .string(value)) : .string(value)))
            }
            request = ("POST", "/devices/\(escape(args[2]))/commands", JSONValue.object(JSONObject(members)).jsonText)
        case ("list", 3): request = ("GET", "/devices/\(escape(args[2]))/commands", nil)
        case ("show", 3): request = ("GET", "/commands/\(escape(args[2]))", nil)
        case ("cancel", 3): request = ("DELETE", "/commands/\(escape(args[2]))", nil)
        default: LocgateCommand.fail(usage, code: 2)
        }
        let host = api.host == "0.0.0.0" ? "127.0.0.1" : api.host == "::" ? "::1" : api.host
        let answer: HTTPAnswer
        do {
            answer = try await HTTPAnswer.fetch(host: host, port: api.port, method: request.method, path: request.path,
                                                token: token, body: request.body)
        } catch {
            LocgateCommand.fail("cannot reach the gateway's API at \(api.listen): \(error) (is the pipeline running?)", code: 1)
        }
        guard (200..<300).contains(answer.status) else {
            let problems = (try? JSONValue.parse(answer.body))?["problems"]?.arrayValue?.compactMap(\.stringValue)
            let text = problems?.joined(separator: "\n") ?? String(decoding: answer.body, as: UTF8.self)
            LocgateCommand.fail("\(answer.status): \(text.trimmingCharacters(in: .whitespacesAndNewlines))", code: 1)
        }
        let value = (try? JSONValue.parse(answer.body)) ?? .null
        if action == "list" {
            print(table(value["commands"]?.arrayValue ?? []), terminator: "")
        } else {
            print(show(value), terminator: "")
        }
    }

    /// One line per command, newest first.
    static func table(_ commands: [JSONValue]) -> String {
        let rows = commands.map { c in
            ["id", "type", "status", "created", "result"].map { c[$0]?.stringValue ?? "" }
        }
        return StateCommand.table(["ID", "TYPE", "STATUS", "CREATED", "RESULT"], rows) + "\(rows.count) command(s)\n"
    }

    /// A command, field by field, with its history.
    static func show(_ c: JSONValue) -> String {
        var out = ""
        for key in ["id", "device", "type", "status", "result", "created", "expires", "submitted_by", "source"] {
            if let v = c[key]?.scalarText { out += "\(key): \(v)\n" }
        }
        if let p = c["parameters"]?.objectValue, !p.isEmpty { out += "parameters: " + p.map { "\($0.key)=\($0.value.scalarText ?? "")" }.joined(separator: " ") + "\n" }
        if let sends = c["sends"]?.scalarText, let attempts = c["attempts"]?.scalarText { out += "sends: \(sends) of \(attempts)\n" }
        for h in c["history"]?.arrayValue ?? [] {
            out += "  \(h["time"]?.stringValue ?? "")  \(h["status"]?.stringValue ?? "")\n"
        }
        return out
    }

    /// A path segment with everything but unreserved characters percent-encoded.
    static func escape(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? segment
    }
}

/// One HTTP/1.1 exchange with the operator API.
struct HTTPAnswer {
    var status: Int
    var body: [UInt8]

    static func fetch(host: String, port: Int, method: String, path: String, token: String?, body: String?) async throws -> HTTPAnswer {
        let wakeup = try Wakeup()
        let socket = try await Socket.connect(host: host, port: port, timeout: .seconds(5), wakeup: wakeup)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\nConnection: close\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        let payload = Array((body ?? "").utf8)
        if body != nil { head += "Content-Type: application/json\r\nContent-Length: \(payload.count)\r\n" }
        try await socket.sendAll(Array((head + "\r\n").utf8) + payload, timeout: .seconds(10), wakeup: wakeup)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = ContinuousClock.now + .seconds(10)
        while received.count < 16 << 20 {
            guard ContinuousClock.now < deadline else { throw HTTPAnswerError(description: "no whole answer within 10 s") }
            switch try await socket.read(into: &buffer, timeout: .seconds(1), wakeup: wakeup) {
            case .bytes(let n): received += buffer[0..<n]
            case .end: return try parse(received)
            case .nothing: continue
            }
        }
        throw HTTPAnswerError(description: "an answer over 16 MB")
    }

    /// Status line, headers, body (to the end: `Connection: close`).
    static func parse(_ bytes: [UInt8]) throws -> HTTPAnswer {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { Array(bytes[$0..<($0 + 4)]) == separator }) else {
            throw HTTPAnswerError(description: "not an HTTP answer")
        }
        let statusLine = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\r\n").first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw HTTPAnswerError(description: "not an HTTP answer: \(statusLine)") }
        return HTTPAnswer(status: status, body: Array(bytes[(end + 4)...]))
    }
}

struct HTTPAnswerError: Error, CustomStringConvertible {
    var description: String
}
