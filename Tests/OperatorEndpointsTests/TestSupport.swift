import PluginCatalog
import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import OperatorEndpoints
import Testing

/// A pipeline running in this process with its operator API on a free loopback port.
struct APIHarness: Sendable {
    let pipeline: Pipeline
    let api: OperatorAPI
    let port: Int

    /// Loads `json` (where `$API_PORT` is replaced by a free port), starts the API and the
    /// pipeline, runs `body`, then stops both.
    static func run(_ json: String, environment: [String: String] = [:],
                    _ body: @Sendable (APIHarness) async throws -> Void) async throws {
        let text = json.replacingOccurrences(of: "$API_PORT", with: String(LoopbackTCPServer.freePort()))
        let configuration = try PipelineConfiguration.load(json: Array(text.utf8), registry: BuiltinPlugins.registry, environment: environment)
        let settings = try #require(configuration.api)
        let log = RecordingLogHandler(minimumLevel: .info)
        let monitor = PipelineActivity(tail: settings.mapTail)
        let pipeline = try Pipeline(configuration: configuration, logHandler: log, observer: monitor)
        let api = OperatorAPI(settings: settings, configuration: configuration, stats: pipeline.componentStats, monitor: monitor, version: "test",
                              commands: pipeline.deviceCommands)
        let port = try api.start(logger: Logger(label: "api", handler: log))
        defer { api.stop() }
        let harness = APIHarness(pipeline: pipeline, api: api, port: port)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = await pipeline.run() }
            do {
                try await body(harness)
            } catch {
                pipeline.shutdown(reason: "test failed")
                throw error
            }
            pipeline.shutdown(reason: "test done")
            try await group.waitForAll()
        }
    }

    func stats(_ id: String) -> ComponentStats? { pipeline.componentStats.first { $0.id == id } }

    func get(_ path: String, _ extra: [String] = []) throws -> HTTPResult {
        try Curl.run(extra + ["http://127.0.0.1:\(port)\(path)"])
    }

    /// The status of a GET (0 when curl could not run or got no answer).
    func status(_ path: String, _ extra: [String] = []) -> Int {
        (try? get(path, extra))?.status ?? 0
    }
}

/// An answer as curl saw it.
struct HTTPResult: Sendable {
    /// 0 when curl got no HTTP answer (connection refused, TLS failure).
    var status: Int
    var headers: [String: String]
    var body: String
    var curlExit: Int32
}

/// The `curl` command line client, a real HTTP peer.
enum Curl {
    static func run(_ arguments: [String]) throws -> HTTPResult {
        let run = try Program.run("/usr/bin/env", ["curl", "-sS", "-i", "-m", "10"] + arguments)
        let text = run.stdout
        guard let split = text.range(of: "\r\n\r\n") else {
            return HTTPResult(status: 0, headers: [:], body: text, curlExit: run.status)
        }
        let head = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = head.first.flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HTTPResult(status: status, headers: headers, body: String(text[split.upperBound...]), curlExit: run.status)
    }
}

/// A TCP server streaming one NMEA epoch every 100 ms: the peer of a `tcp` source.
func nmeaServer() throws -> LoopbackTCPServer {
    let server = LoopbackTCPServer(interval: .milliseconds(100)) { Array(NMEASamples.epoch($0).utf8) }
    try server.start()
    return server
}

/// The value of the sample `name{labels}` in a metrics page, nil when absent.
func sample(_ page: String, _ series: String) -> Double? {
    for line in page.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1))
    }
    return nil
}

let packageRoot = LocgateBinary.packageRoot.path

func temporaryDirectory(_ name: String) throws -> String {
    let dir = NSTemporaryDirectory() + "locgate-api-\(name)-\(getpid())"
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// Raises this process's soft limit of open files towards `wanted` (never above the hard limit);
/// returns the limits now in force.
func raiseOpenFileLimit(to wanted: UInt64) -> (soft: UInt64, hard: UInt64) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (0, 0) }
    if limit.rlim_cur < wanted {
        var raised = limit
        raised.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
}
