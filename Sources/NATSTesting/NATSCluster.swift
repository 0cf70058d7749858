import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatewayCore
import GatewayTesting
import Locking
import NATSClient

/// A real 3-node nats-server JetStream cluster on 127.0.0.1, on free ports, in a temporary
/// directory: one config file per node (server_name, listen, http, cluster routes, jetstream
/// store_dir). `kill9(_:)` and `restart(_:)` take one node away and back; `stop()` ends all.
public final class NATSCluster: @unchecked Sendable {
    public struct Node {
        public var name: String
        public var clientPort: Int
        public var clusterPort: Int
        public var httpPort: Int
        public var config: String
        var process: Process?
    }

    public let directory: String
    // Guarded by being used from one test task at a time.
    public private(set) var nodes: [Node] = []

    /// How the test's own connections authenticate (matching `extraConfig`).
    public let credentials: NATSConnectionOptions.Credentials

    /// `size` nodes (1: a single server without a cluster block); `extraConfig` is added to
    /// every node's configuration (an `authorization` block, a `mappings` block).
    public init(size: Int = 3, extraConfig: String = "", credentials: NATSConnectionOptions.Credentials = .none) throws {
        self.credentials = credentials
        directory = NSTemporaryDirectory() + "locgate-nats-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var ports = Set<Int>()
        func port() -> Int {
            while true {
                let p = LoopbackTCPServer.freePort()
                if ports.insert(p).inserted { return p }
            }
        }
        for i in 1...size {
            nodes.append(Node(name: "n\(i)", clientPort: port(), clusterPort: port(), httpPort: port(), config: "\(directory)/n\(i).conf"))
        }
        for n in nodes {
            let routes = nodes.filter { $0.name != n.name }.map { "nats-route://127.0.0.1:\($0.clusterPort)" }
            var text = """
                server_name: \(n.name)
                listen: 127.0.0.1:\(n.clientPort)
                http: 127.0.0.1:\(n.httpPort)
                jetstream { store_dir: "\(directory)/\(n.name)-store" }
                \(extraConfig)

                """
            if size > 1 {
                text += """
                    cluster {
                      name: locgate-test
                      listen: 127.0.0.1:\(n.clusterPort)
                      routes: [\(routes.joined(separator: ", "))]
                    }
                    """
            }
            try text.write(toFile: n.config, atomically: true, encoding: .utf8)
        }
    }

    deinit { stop() }

    /// `nats://127.0.0.1:port` of every node.
    public var urls: [String] { nodes.map { "nats://127.0.0.1:\($0.clientPort)" } }

    /// Starts every node and waits until the cluster elected a JetStream meta leader.
    public func start() async throws {
        for i in nodes.indices { try launch(i) }
        try await waitForMetaLeader(on: Array(nodes.indices))
    }

    private func launch(_ i: Int) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/nats-server")
        p.arguments = ["-c", nodes[i].config]
        let log = "\(directory)/\(nodes[i].name).log"
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        p.standardOutput = handle
        p.standardError = handle
        try p.run()
        nodes[i].process = p
    }

    /// kill -9 of one node: no goodbye to clients or peers.
    public func kill9(_ i: Int) {
        guard let p = nodes[i].process else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        nodes[i].process = nil
    }

    /// Starts a killed node again on its ports and store, and waits until it sees the meta leader.
    public func restart(_ i: Int) async throws {
        try launch(i)
        try await waitForMetaLeader(on: [i])
    }

    public func stop() {
        for i in nodes.indices { kill9(i) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The `/jsz` report of node `i`.
    public func jsz(_ i: Int, query: String = "") async throws -> JSONValue {
        let url = URL(string: "http://127.0.0.1:\(nodes[i].httpPort)/jsz\(query)")!
        let (data, _) = try await URLSession.shared.data(from: url)
        return try JSONValue.parse(Array(data))
    }

    private func waitForMetaLeader(on indices: [Int]) async throws {
        let single = nodes.count == 1
        let ok = await Poll.until(timeout: .seconds(60), interval: .milliseconds(100)) { [self] in
            for i in indices {
                guard let report = try? await jsz(i) else { return false }
                // A single server has no meta group: JetStream is up once it reports its config.
                if single { return report["config"] != nil }
                guard let leader = report["meta_cluster"]?["leader"]?.stringValue, !leader.isEmpty else { return false }
            }
            return true
        }
        if !ok { throw ClusterError("no JetStream meta leader after 60 s; see \(directory)/*.log") }
    }

    /// A connection to the cluster with a JetStream context, for setting up and inspecting streams.
    public func connect() async throws -> NATSConnection {
        var o = NATSConnectionOptions()
        o.servers = urls
        o.name = "locgate-test"
        o.credentials = credentials
        let c = try await NATSConnection.connect(o, jetStream: NATSJetStreamSettings(apiTimeout: .seconds(10))) { _ in }
        try await c.waitUntilConnected()
        return c
    }

    /// Creates a stream (R3 by default), retrying while the cluster is still assigning peers.
    @discardableResult
    public func createStream(_ name: String, subjects: [String], replicas: Int = 3, duplicateWindow: Duration = .seconds(600)) async throws -> NATSStreamInfo {
        let c = try await connect()
        var lastError: (any Error)?
        for _ in 0..<100 {
            do {
                let info = try await c.createStream(NATSStreamConfig(name: name, subjects: subjects, replicas: replicas,
                                                                     duplicateWindow: duplicateWindow, fileStorage: true)).info
                await c.close()
                return info
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        await c.close()
        throw ClusterError("cannot create stream \(name): \(String(describing: lastError))")
    }

    /// How many messages `stream` holds (one request, cheap enough to poll).
    public func count(_ stream: String) async throws -> UInt64 {
        let c = try await connect()
        let info = try await c.streamInfo(stream)
        await c.close()
        return info?.messages ?? 0
    }

    /// Waits until every running node that holds a replica of `stream` reports the same last
    /// sequence and the same stream leader: a node restarted a moment ago catches up from the
    /// leader first, and a read before that could be answered from its older view.
    public func waitUntilReplicasAgree(_ stream: String, timeout: Duration = .seconds(60)) async throws {
        let seen = Locked("")
        let agreed = await Poll.until(timeout: timeout, interval: .milliseconds(100)) { [self] in
            // Each replica's view: its last sequence and the leader it knows ("" for none).
            var views: [(node: String, last: String, leader: String)] = []
            for i in nodes.indices where nodes[i].process != nil {
                guard let report = try? await jsz(i, query: "?streams=true"),
                      case .array(let accounts)? = report["account_details"] else { return false }
                for account in accounts {
                    guard case .array(let streams)? = account["stream_detail"] else { continue }
                    for s in streams where s["name"]?.stringValue == stream {
                        views.append((nodes[i].name, s["state"]?["last_seq"]?.jsonText ?? "?", s["cluster"]?["leader"]?.stringValue ?? ""))
                    }
                }
            }
            seen.withLock { $0 = views.map { "\($0.node): last \($0.last), leader \($0.leader.isEmpty ? "none" : $0.leader)" }.joined(separator: "; ") }
            guard let first = views.first, !first.leader.isEmpty else { return false }
            return views.allSatisfy { $0.last == first.last && $0.leader == first.leader }
        }
        if !agreed { throw ClusterError("the replicas of \(stream) did not agree within \(timeout): \(seen.withLock { $0 })") }
    }

    /// Every message of `stream`, read back through the stream's get API once the replicas agree
    /// (``waitUntilReplicasAgree(_:timeout:)``).
    public func messages(_ stream: String) async throws -> [NATSStoredMessage] {
        try await waitUntilReplicasAgree(stream)
        let c = try await connect()
        guard let info = try await c.streamInfo(stream) else { throw ClusterError("no stream \(stream)") }
        let all = info.lastSequence == 0 ? [] : try await c.storedMessages(stream: stream, sequences: 1...info.lastSequence)
        await c.close()
        return all
    }

    /// The durable consumer `name` of `stream` as the server reports it now.
    public func consumer(_ stream: String, _ name: String) async throws -> NATSConsumerInfo? {
        let c = try await connect()
        let info = try await c.consumerInfo(stream: stream, name: name)
        await c.close()
        return info
    }
}

public struct ClusterError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
