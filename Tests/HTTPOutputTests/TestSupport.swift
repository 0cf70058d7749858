import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import HTTPOutput
import Testing

/// The package root, found from this file's path.
let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// One request the receiver recorded.
struct RecordedRequest {
    var status: Int
    var headers: [String: String]
    var body: String

    /// The body as JSON.
    var json: JSONValue? { try? JSONValue.parse(string: body) }

    /// The `id` of every position object in a json_array body.
    var ids: [String] {
        json?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }
}

/// The Python receiver in `Support/receiver.py`, on a free loopback port.
final class Receiver: @unchecked Sendable {
    let recordPath: String
    private(set) var port: Int = 0
    private var process: Process?
    /// The script in `Support/`: `receiver.py`, or `connect_proxy.py` for a CONNECT proxy.
    let script: String

    /// Starts it; `port` 0 picks a free port, a given port restarts on the same one.
    init(directory: String, arguments: [String] = [], port: Int = 0, name: String = "received.jsonl", script: String = "receiver.py") throws {
        recordPath = directory + "/" + name
        self.script = script
        try start(arguments: arguments, port: port)
    }

    func start(arguments: [String] = [], port requested: Int? = nil) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let script = packageRoot.appendingPathComponent("Tests/HTTPOutputTests/Support/\(self.script)").path
        p.arguments = ["python3", script, "--record", recordPath, "--port", String(requested ?? port)] + arguments
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        process = p
        // The first line is "PORT <n>".
        var line: [UInt8] = []
        let handle = out.fileHandleForReading
        while let byte = try handle.read(upToCount: 1)?.first, byte != 10 { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let n = Int(text.dropFirst(5)) else {
            p.terminate()
            throw HTTPSinkError(message: "receiver did not start: \(text)")
        }
        port = n
    }

    func stop() {
        guard let p = process else { return }
        // SIGKILL: a child of the test process may inherit a mask that blocks SIGTERM.
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    deinit { stop() }

    var url: String { "http://127.0.0.1:\(port)/track" }
    var httpsURL: String { "https://127.0.0.1:\(port)/track" }

    /// Lines the proxy recorded (`CONNECT host:port HTTP/1.1`).
    func proxiedLines() -> [String] {
        ((try? String(contentsOfFile: recordPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Replaces the receiver's rules (see receiver.py).
    func control(_ json: String) async throws {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/_control")!)
        request.httpMethod = "POST"
        request.httpBody = Data(json.utf8)
        _ = try await URLSession.shared.data(for: request)
    }

    /// How many of the rules set by ``control(_:)`` are not used up yet (a rule is used as its
    /// request arrives, before any delay or hold).
    func rulesLeft() async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/_control")!)
        return try JSONValue.parse(string: String(decoding: data, as: UTF8.self))["rules_left"]?.arrayValue?.count ?? -1
    }

    /// Every request recorded so far.
    func requests() -> [RecordedRequest] {
        guard let text = try? String(contentsOfFile: recordPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let v = try? JSONValue.parse(string: String(line)), let o = v.objectValue else { return nil }
            var headers: [String: String] = [:]
            for m in o["headers"]?.objectValue ?? JSONObject() { headers[m.key] = m.value.stringValue }
            return RecordedRequest(status: Int(o["status"]?.numberValue ?? -1), headers: headers, body: o["body"]?.stringValue ?? "")
        }
    }

    /// Requests answered 2xx, in order.
    func accepted() -> [RecordedRequest] { requests().filter { (200..<300).contains($0.status) } }
}

/// The http sink under test, in this process.
typealias Harness = SinkHarness<HTTPSinkPlugin>

/// The options of the sink `sinks.up`, with `VIP_ID` in the environment; any problem throws.
func configuration(_ json: String) throws -> HTTPSinkConfiguration {
    try PluginOptions.valid(HTTPSinkPlugin.self, json, path: "sinks.up", environment: ["VIP_ID": "vip-42"])
}

/// The options of the sink `sinks.up`, and the problems they have.
func configure(_ json: String) throws -> (HTTPSinkConfiguration, [String]) {
    let (c, problems) = try PluginOptions.read(HTTPSinkPlugin.self, json, path: "sinks.up", environment: ["VIP_ID": "vip-42"])
    return (c, problems.map(\.description))
}

/// The numeric part of ids such as `t-17` or `rx-1714521600000`.
func ordinal(_ id: String) -> Int? { id.split(separator: "-").last.flatMap { Int($0) } }
