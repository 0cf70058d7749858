import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
import NATSState
import NATSTesting
import PluginCatalog
import Testing

/// Two gateways on one 3-node JetStream cluster share their commands (`settings.state.nats`): a
/// command submitted to one reaches the terminal through the one that holds its connection, once;
/// the terminal moves to the other with a command pending and gets it there, once; each command's
/// status reads the same from both.
@Suite(.serialized) struct FleetCommandTests {
    /// A gateway: a `jt808` source on its own port, the fleet's state and commands in the cluster.
    struct Gateway {
        let pipeline: Pipeline
        let port: Int
        let run: Task<Int32, Never>

        init(cluster: NATSCluster, dir: String, name: String) throws {
            port = LoopbackTCPServer.freePort()
            let servers = cluster.urls.map { "\"\($0)\"" }.joined(separator: ",")
            let json = """
            { "settings": { "stats_interval": false, "state": { "nats": { "servers": [\(servers)], "timeout": "20s" } } },
              "sources": { "trk": { "type": "jt808", "listen": "127.0.0.1:\(port)", "devices": { "13912345678": "bus-12" } } },
              "sinks": { "out": { "type": "file", "inputs": ["trk"], "path": "\(dir)/\(name).jsonl" } } }
            """
            let configuration = try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry)
            pipeline = try Pipeline(configuration: configuration, logHandler: SilentLogHandler())
            let p = pipeline
            run = Task { await p.run() }
        }

        var commands: any CommandCenter { pipeline.deviceCommands! }

        func stop() async {
            pipeline.shutdown(reason: "test done")
            _ = await run.value
        }
    }

    /// A terminal that registers once (the code is the fleet's) and counts the 0x8103 it gets.
    final class Terminal: @unchecked Sendable {
        var terminal = JT808TestTerminal(phone: "013912345678")
        var code: [UInt8] = []
        var client: LoopbackTCPClient?
        var deliveries: [UInt32: Int] = [:]

        func connect(_ port: Int) async throws {
            #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
            let c = try LoopbackTCPClient(port: port)
            if code.isEmpty {
                c.send(terminal.register())
                let registered = try #require(JT808TestTerminal.read(c))
                code = Array(registered.body.dropFirst(3))
            }
            c.send(terminal.frame(0x0102, code))
            #expect(JT808TestTerminal.read(c)?.body.last == 0, "the code issued by either gateway is accepted by both")
            client = c
        }

        /// Reads the next 0x8103 (counted by its interval) and answers it; nil when none comes.
        func takeCommand(timeout: Duration = .seconds(10)) -> UInt32? {
            guard let c = client else { return nil }
            while let frame = JT808TestTerminal.read(c, timeout: timeout) {
                guard frame.id == 0x8103 else { continue }
                let s = UInt32(frame.body[6]) << 24 | UInt32(frame.body[7]) << 16 | UInt32(frame.body[8]) << 8 | UInt32(frame.body[9])
                deliveries[s, default: 0] += 1
                c.send(terminal.frame(0x0001, JT808TestTerminal.word(frame.serial) + [0x81, 0x03, 0]))
                return s
            }
            return nil
        }

        func disconnect() {
            client?.close()
            client = nil
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aCommandGoesOnceThroughWhicheverGatewayHoldsTheTerminal() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try Gateway(cluster: cluster, dir: dir, name: "a"), b = try Gateway(cluster: cluster, dir: dir, name: "b")
        let terminal = Terminal()
        try await terminal.connect(b.port)

        // Submitted to A, the terminal is on B.
        let first = try a.commands.submit(CommandRequest(device: "bus-12", type: .setInterval, parameters: ["interval": "21s"], submittedBy: "ops"))
        #expect(terminal.takeCommand() == 21)
        #expect(await Poll.until { a.commands.command(first.id)?.status == .done })
        #expect(b.commands.command(first.id)?.status == .done)

        // Submitted to B while the terminal is offline; it comes back on A.
        terminal.disconnect()
        let second = try b.commands.submit(CommandRequest(device: "bus-12", type: .setInterval, parameters: ["interval": "22s"], submittedBy: "ops"))
        try await terminal.connect(a.port)
        #expect(terminal.takeCommand() == 22)
        #expect(await Poll.until { b.commands.command(second.id)?.status == .done })
        #expect(a.commands.command(second.id)?.history.map(\.status) == [.queued, .sent, .done])

        // Nothing more comes, and nothing came twice.
        #expect(terminal.takeCommand(timeout: .seconds(2)) == nil)
        #expect(terminal.deliveries == [21: 1, 22: 1])
        await a.stop()
        await b.stop()
    }

    /// Another gateway's command can reach this one's watch before the stream leader stored it
    /// (the core subscription does not wait for the replicas). A gateway that moves it then must
    /// find it once stored, not take it for gone: the cause of a command submitted on one gateway
    /// and never sent by the other (seen under load).
    @Test(.timeLimit(.minutes(2)))
    func aCommandSeenBeforeTheStreamStoredItIsMovedOnceItIsStored() async throws {
        let cluster = try NATSCluster()
        defer { cluster.stop() }
        try await cluster.start()
        func open() throws -> NATSCommandStore {
            var c = NATSStateConfiguration()
            c.connection.servers = cluster.urls
            c.timeout = .seconds(20)
            return try NATSCommandStore(configuration: c, context: StateStoreContext(logger: RecordingLogHandler().logger(label: "commands"), clock: .system))
        }
        let here = try open(), there = try open()
        defer { here.close(); there.close() }
        let created = Timestamp(year: 2026, month: 12, day: 1)
        let queued = DeviceCommand(id: "c-late", device: "bus-12", type: .setInterval, parameters: ["interval": "30s"], created: created,
                                   expires: Timestamp(milliseconds: created.milliseconds + 3_600_000), attempts: 3, submittedBy: "ops", source: "trk")
        var sent = queued
        sent.move(to: .sent, at: Timestamp(milliseconds: created.milliseconds + 1000))
        // The other gateway's write lands 100 ms after this one starts moving the command.
        let writer = Task.detached {
            try await Task.sleep(for: .milliseconds(100))
            try there.save(queued, expecting: nil)
        }
        try here.save(sent, expecting: .queued)
        try await writer.value
        #expect(try there.fetch("c-late")?.history.map(\.status) == [.queued, .sent])
        // A command that never comes is still gone, after the bounded wait.
        var phantom = queued
        phantom.id = "c-never"
        phantom.move(to: .sent, at: created)
        #expect(throws: CommandError.self) { try here.save(phantom, expecting: .queued) }
    }
}
