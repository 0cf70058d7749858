import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// Trackers call in, locgate is killed -9 again and again: every record a device was answered
/// for (and so deleted from its memory) must be in every sink.
@Suite(.serialized)
struct DevicesCallInTests {
    static let simulator = LocgateBinary.packageRoot.appendingPathComponent("Tests/Support/device_simulator.py").path

    /// (imei, fix time in ms) of every record the simulator was answered for.
    static func answered(_ path: String) throws -> [String: Set<Int64>] {
        var out: [String: Set<Int64>] = [:]
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return out }
        for line in text.split(separator: "\n") {
            let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            guard let imei = o?["imei"] as? String, let t = o?["time_ms"] as? NSNumber else { continue }
            out[imei, default: []].insert(t.int64Value)
        }
        return out
    }

    /// (device, fix time in ms) of the positions in JSON texts (one position each, or arrays).
    static func delivered(_ documents: [String]) -> [String: [Int64]] {
        var out: [String: [Int64]] = [:]
        func add(_ p: [String: Any]) {
            guard let device = p["device"] as? String, let time = p["time"] as? String, let t = Timestamp(iso8601: time) else { return }
            out[device, default: []].append(t.milliseconds)
        }
        for text in documents {
            guard let value = try? JSONSerialization.jsonObject(with: Data(text.utf8)) else { continue }
            if let p = value as? [String: Any] { add(p) }
            if let list = value as? [[String: Any]] { list.forEach(add) }
        }
        return out
    }

    /// The request bodies the receiver answered 200.
    static func received(_ record: String) -> [String] {
        guard let text = try? String(contentsOfFile: record, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let r = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  r["status"] as? Int == 200 else { return nil }
            return r["body"] as? String
        }
    }

    /// Writes `<dir>/pipeline.json`: the `sources` (JSON members) into a file sink and a durable
    /// http sink posting to the receiver on `uploadPort`.
    static func writePipeline(_ dir: String, sources: String, inputs: [String], uploadPort: Int, batch: Int = 500) throws {
        let names = inputs.map { "\"\($0)\"" }.joined(separator: ",")
        try Data("""
        {"settings":{"shutdown_timeout":"1s","stats_interval":false},
         "sources":{\(sources)},
         "sinks":{"file":{"type":"file","inputs":[\(names)],"path":"positions.jsonl"},
                  "upload":{"type":"http","inputs":[\(names)],"url":"http://127.0.0.1:\(uploadPort)/track",
                            "batch":{"max_positions":\(batch),"interval":"200ms"},"retry":{"initial":"100ms","max":"500ms"},
                            "queue":{"path":"upload.sqlite"}}}}
        """.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
    }

    /// Waits until the uploads hold every fix the devices were answered for, stops locgate, and
    /// expects none of them missing from the file either.
    static func expectEveryAnsweredFixInBothSinks(_ answered: [String: Set<Int64>], dir: String, record: String,
                                                  locgate: KilledRuns, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(await Poll.until(timeout: .seconds(60)) {
            let uploaded = Self.delivered(Self.received(record))
            return answered.allSatisfy { device, times in times.isSubset(of: Set(uploaded[device] ?? [])) }
        }, "answered fixes never uploaded", sourceLocation: sourceLocation)
        locgate.stop()
        let filed = Self.delivered(try String(contentsOfFile: "\(dir)/positions.jsonl", encoding: .utf8).split(separator: "\n").map(String.init))
        let missing = answered.reduce(0) { $0 + $1.value.subtracting(filed[$1.key] ?? []).count }
        #expect(missing == 0, "\(missing) answered fixes missing from the file", sourceLocation: sourceLocation)
    }

    @Test(.timeLimit(.minutes(3)))
    func killedAgainAndAgainItLosesNoRecordADeviceWasAnsweredFor() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let teltonikaPort = LoopbackTCPServer.freePort(), gt06Port = LoopbackTCPServer.freePort()
        let record = "\(dir)/requests.jsonl"
        let server = try ScriptPeer(script: DrainTests.receiver, arguments: ["--record", record, "--port", "0"])
        defer { server.stop() }
        let config = """
        {"settings":{"shutdown_timeout":"1s","stats_interval":false},
         "sources":{"fmb":{"type":"teltonika","listen":"127.0.0.1:\(teltonikaPort)","unknown_devices":"accept"},
                    "gt":{"type":"gt06","listen":"127.0.0.1:\(gt06Port)","unknown_devices":"accept"}},
         "sinks":{"file":{"type":"file","inputs":["fmb","gt"],"path":"positions.jsonl"},
                  "upload":{"type":"http","inputs":["fmb","gt"],"url":"http://127.0.0.1:\(server.port)/track",
                            "batch":{"max_positions":200,"interval":"200ms"},"retry":{"initial":"100ms","max":"500ms"},
                            "queue":{"path":"upload.sqlite"}}}}
        """
        try Data(config.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
        let locgate = try KilledRuns(pipeline: "\(dir)/pipeline.json", directory: dir)
        #expect(await locgate.started(saying: "listening for GT06 devices"), "\(locgate.firstLog)")

        // 20 Teltonika devices, 15 frames of 5 records; 20 GT06 devices, 60 positions each.
        let done = "\(dir)/done"
        let teltonika = try LocgateBinary.launch(["/usr/bin/env", "python3", Self.simulator, "--protocol", "teltonika", "--port", "\(teltonikaPort)",
                                                          "--devices", "20", "--frames", "15", "--records", "5", "--interval", "0.05",
                                                          "--answered", "\(dir)/answered-teltonika.jsonl", "--until-file", done, "--seed", "7"],
                                                 stderr: "\(dir)/teltonika.err", stdout: "\(dir)/teltonika.out")
        let gt06 = try LocgateBinary.launch(["/usr/bin/env", "python3", Self.simulator, "--protocol", "gt06", "--port", "\(gt06Port)",
                                                     "--devices", "20", "--frames", "60", "--interval", "0.02", "--first-imei", "860000000000000",
                                                     "--answered", "\(dir)/answered-gt06.jsonl", "--until-file", done, "--seed", "8"],
                                            stderr: "\(dir)/gt06.err", stdout: "\(dir)/gt06.out")
        defer {
            for p in [teltonika, gt06] where p.isRunning { kill(p.processIdentifier, SIGKILL) }
        }
        // Kill -9 at seeded moments while the devices send, and start again.
        try await locgate.kill(times: 4, seed: 28, milliseconds: 700...1_800)
        #expect(await Poll.until(timeout: .seconds(120)) { !teltonika.isRunning && !gt06.isRunning }, "the simulators did not finish")
        _ = FileManager.default.createFile(atPath: done, contents: nil)
        var resends = 0
        for (name, p) in [("teltonika", teltonika), ("gt06", gt06)] {
            let out = (try? String(contentsOfFile: "\(dir)/\(name).out", encoding: .utf8)) ?? ""
            #expect(p.terminationStatus == 0, "\(name) simulator: \(out)")
            let summary = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any]
            resends += (summary?["resends"] as? Int) ?? 0
        }
        // The kills came while frames were waiting for their answers.
        #expect(resends > 0)
        let answered = try Self.answered("\(dir)/answered-teltonika.jsonl").merging(try Self.answered("\(dir)/answered-gt06.jsonl")) { $0.union($1) }
        let answeredCount = answered.values.reduce(0) { $0 + $1.count }
        #expect(answeredCount == 20 * 15 * 5 + 20 * 60)
        // The upload queue drains once the devices are done.
        #expect(await Poll.until(timeout: .seconds(60)) {
            let uploaded = Self.delivered(Self.received(record))
            return answered.allSatisfy { imei, times in times.isSubset(of: Set(uploaded[imei] ?? [])) }
        })
        locgate.stop()
        let lines = try String(contentsOfFile: "\(dir)/positions.jsonl", encoding: .utf8).split(separator: "\n").map(String.init)
        let filed = Self.delivered(lines)
        let uploaded = Self.delivered(Self.received(record))
        var missingInFile = 0, missingUploaded = 0
        for (imei, times) in answered {
            missingInFile += times.subtracting(filed[imei] ?? []).count
            missingUploaded += times.subtracting(uploaded[imei] ?? []).count
        }
        #expect(missingInFile == 0, "\(missingInFile) answered records missing from the file")
        #expect(missingUploaded == 0, "\(missingUploaded) answered records never uploaded")
        // Resent frames come back with the same ids: duplicates are allowed, and recognisable.
        #expect(locgate.runs == 5)
    }

    /// 200 JT/T 808 terminals register once, authenticate on every connection with the code they
    /// were issued, and send single fixes and 0x0704 batches of 10 into a file and a durable http
    /// sink while locgate is killed -9 again and again: every fix a terminal was answered for is in
    /// both sinks, and no terminal's code is refused after a restart (the codes are in the state
    /// store beside the queue).
    @Test(.timeLimit(.minutes(3)))
    func jt808TerminalsKilledAgainAndAgainLoseNoFixAndKeepTheirCodes() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort()
        let record = "\(dir)/requests.jsonl"
        let server = try ScriptPeer(script: DrainTests.receiver, arguments: ["--record", record, "--port", "0"])
        defer { server.stop() }
        try Self.writePipeline(dir, sources: """
            "jt":{"type":"jt808","listen":"127.0.0.1:\(port)","unknown_devices":"accept"}
            """, inputs: ["jt"], uploadPort: server.port)
        let locgate = try KilledRuns(pipeline: "\(dir)/pipeline.json", directory: dir)
        #expect(await locgate.started(saying: "listening for JT/T 808 devices"), "\(locgate.firstLog)")

        // 200 terminals, 6 messages each: 3 single fixes and 3 batches of 10 (33 fixes a terminal).
        let done = "\(dir)/done"
        let terminals = try LocgateBinary.launch(["/usr/bin/env", "python3", Self.simulator, "--protocol", "jt808", "--port", "\(port)",
                                                  "--devices", "200", "--frames", "6", "--records", "10", "--interval", "0.6",
                                                  "--first-imei", "13900000000", "--answered", "\(dir)/answered.jsonl",
                                                  "--until-file", done, "--seed", "9"],
                                                 stderr: "\(dir)/jt808.err", stdout: "\(dir)/jt808.out")
        defer { if terminals.isRunning { kill(terminals.processIdentifier, SIGKILL) } }
        try await locgate.kill(times: 4, seed: 808, milliseconds: 500...1_200)
        #expect(await Poll.until(timeout: .seconds(120)) { !terminals.isRunning }, "the simulator did not finish")
        _ = FileManager.default.createFile(atPath: done, contents: nil)
        let out = (try? String(contentsOfFile: "\(dir)/jt808.out", encoding: .utf8)) ?? ""
        #expect(terminals.terminationStatus == 0, "simulator: \(out)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
        // Each terminal registered once and authenticated again after the kills with its code.
        #expect(summary["registrations"] as? Int == 200, "\(summary)")
        #expect(summary["auth_refused"] as? Int == 0, "\(summary)")
        #expect((summary["authentications"] as? Int ?? 0) > 200, "\(summary)")
        #expect((summary["resends"] as? Int ?? 0) > 0, "the kills came while messages waited for their answers")
        let answered = try Self.answered("\(dir)/answered.jsonl")
        #expect(answered.values.reduce(0) { $0 + $1.count } == 200 * 33)
        try await Self.expectEveryAnsweredFixInBothSinks(answered, dir: dir, record: record, locgate: locgate)
        #expect(locgate.runs == 5)
    }

    /// 50 GPS103 trackers and 50 watches send groups of fixes ending with an alarm (GPS103's SOS,
    /// a watch's `AL`) into a file and a durable http sink while locgate is killed -9 again and
    /// again. Their positions have no answer in these protocols; the alarm's answer comes only once
    /// its position — and so every fix sent before it on the connection — was committed: every fix
    /// a device was answered for that way is in both sinks.
    @Test(.timeLimit(.minutes(3)))
    func textTrackersKilledAgainAndAgainLoseNoFixTheyWereAnsweredFor() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gps103Port = LoopbackTCPServer.freePort(), watchPort = LoopbackTCPServer.freePort()
        let record = "\(dir)/requests.jsonl"
        let server = try ScriptPeer(script: DrainTests.receiver, arguments: ["--record", record, "--port", "0"])
        defer { server.stop() }
        try Self.writePipeline(dir, sources: """
            "coban":{"type":"gps103","listen":"127.0.0.1:\(gps103Port)","unknown_devices":"accept"},
            "watches":{"type":"watch","listen":"127.0.0.1:\(watchPort)","unknown_devices":"accept"}
            """, inputs: ["coban", "watches"], uploadPort: server.port)
        let locgate = try KilledRuns(pipeline: "\(dir)/pipeline.json", directory: dir)
        #expect(await locgate.started(saying: "listening for watch devices"), "\(locgate.firstLog)")
        // Each device: 8 groups of 5 fixes, the last of each an alarm.
        let done = "\(dir)/done"
        let simulators = try [("gps103", gps103Port, "860000000000000"), ("watch", watchPort, "9000000000")].map { name, port, first in
            (name, try LocgateBinary.launch(["/usr/bin/env", "python3", Self.simulator, "--protocol", name, "--port", "\(port)",
                                             "--devices", "50", "--frames", "8", "--records", "5", "--interval", "0.3",
                                             "--first-imei", first, "--answered", "\(dir)/answered-\(name).jsonl",
                                             "--until-file", done, "--seed", "45"],
                                            stderr: "\(dir)/\(name).err", stdout: "\(dir)/\(name).out"))
        }
        defer { for (_, p) in simulators where p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        try await locgate.kill(times: 4, seed: 45, milliseconds: 500...1_200)
        #expect(await Poll.until(timeout: .seconds(120)) { simulators.allSatisfy { !$0.1.isRunning } }, "the simulators did not finish")
        _ = FileManager.default.createFile(atPath: done, contents: nil)
        var answered: [String: Set<Int64>] = [:]
        var resends = 0
        for (name, p) in simulators {
            let out = (try? String(contentsOfFile: "\(dir)/\(name).out", encoding: .utf8)) ?? ""
            #expect(p.terminationStatus == 0, "\(name) simulator: \(out)")
            resends += ((try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any])?["resends"] as? Int ?? 0
            answered.merge(try Self.answered("\(dir)/answered-\(name).jsonl")) { $0.union($1) }
        }
        #expect(resends > 0, "the kills came while groups waited for their alarm's answer")
        #expect(answered.values.reduce(0) { $0 + $1.count } == 100 * 8 * 5)
        try await Self.expectEveryAnsweredFixInBothSinks(answered, dir: dir, record: record, locgate: locgate)
        #expect(locgate.runs == 5)
    }

    /// 50 Wialon IPS devices on a `lua_tracker` whose protocol is Examples/Lua/wialon-ips.lua send
    /// black boxes of 10 fixes into a file and a durable http sink while locgate is killed -9
    /// again and again: the script's `#AB#` answers go out only after the commit, so every fix a
    /// device was answered for is in both sinks.
    @Test(.timeLimit(.minutes(3)))
    func aLuaProtocolKilledAgainAndAgainLosesNoFixItAnswered() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort()
        let record = "\(dir)/requests.jsonl"
        let server = try ScriptPeer(script: DrainTests.receiver, arguments: ["--record", record, "--port", "0"])
        defer { server.stop() }
        let script = LocgateBinary.packageRoot.appendingPathComponent("Examples/Lua/wialon-ips.lua").path
        try Self.writePipeline(dir, sources: """
            "wialon":{"type":"lua_tracker","script":"\(script)","listen":"127.0.0.1:\(port)","unknown_devices":"accept"}
            """, inputs: ["wialon"], uploadPort: server.port)
        let locgate = try KilledRuns(pipeline: "\(dir)/pipeline.json", directory: dir)
        #expect(await locgate.started(saying: "listening for Lua"), "\(locgate.firstLog)")
        let done = "\(dir)/done"
        let devices = try LocgateBinary.launch(["/usr/bin/env", "python3", Self.simulator, "--protocol", "wialon", "--port", "\(port)",
                                                "--devices", "50", "--frames", "6", "--records", "10", "--interval", "0.4",
                                                "--answered", "\(dir)/answered.jsonl", "--until-file", done, "--seed", "39"],
                                               stderr: "\(dir)/wialon.err", stdout: "\(dir)/wialon.out")
        defer { if devices.isRunning { kill(devices.processIdentifier, SIGKILL) } }
        try await locgate.kill(times: 4, seed: 39, milliseconds: 500...1_200)
        #expect(await Poll.until(timeout: .seconds(120)) { !devices.isRunning }, "the simulator did not finish")
        _ = FileManager.default.createFile(atPath: done, contents: nil)
        let out = (try? String(contentsOfFile: "\(dir)/wialon.out", encoding: .utf8)) ?? ""
        #expect(devices.terminationStatus == 0, "simulator: \(out)")
        #expect(((try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any])?["resends"] as? Int ?? 0 > 0,
                "the kills came while black boxes waited for their answers")
        let answered = try Self.answered("\(dir)/answered.jsonl")
        #expect(answered.values.reduce(0) { $0 + $1.count } == 50 * 6 * 10)
        try await Self.expectEveryAnsweredFixInBothSinks(answered, dir: dir, record: record, locgate: locgate)
    }

    @Test(.timeLimit(.minutes(1)))
    func aReloadThatChangesAnotherComponentKeepsTheDevicesConnected() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort()
        let config = "\(dir)/pipeline.json"
        func write(_ file: String) throws {
            try Data("""
            { "settings": { "stats_interval": false },
              "sources": { "gt": { "type": "gt06", "listen": "127.0.0.1:\(port)", "devices": { "864717003283581": "bike" } } },
              "sinks": { "out": { "type": "file", "inputs": ["gt"], "path": "\(file)" } } }
            """.utf8).write(to: URL(fileURLWithPath: config))
        }
        try write("a.jsonl")
        let log = "\(dir)/stderr.log"
        let run = try LocgateBinary.launch([try LocgateBinary.path(), "run", config], stderr: log)
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        let stderr: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(await Poll.until { stderr().contains("listening for GT06 devices") }, "\(stderr())")
        let device = try LoopbackTCPClient(port: port)
        device.send(bytes(hex: "78780D01086471700328358100093F040D0A"))
        #expect(device.read(count: 10) == bytes(hex: "78780501000955940d0a"))
        device.send(bytes(hex: "787823120f081b121d37cb01c8e2cc08afd3c020d50201940701d600a1190041ee100576d1470d0a"))
        #expect(device.read(count: 10) == bytes(hex: "787805120576caad0d0a"))
        try write("b.jsonl")
        kill(run.processIdentifier, SIGHUP)
        #expect(await Poll.until { stderr().contains("reloaded: restarted sinks.out, unchanged 1") }, "\(stderr())")
        // The same connection, still logged in: the next position is answered once in b.jsonl.
        device.send(bytes(hex: "78782912170316053b3bcf015b51220af1201105d56100000000000000000000869c0130010000000238d1af0d0a"))
        #expect(device.read(count: 10) == bytes(hex: "7878051202382cdf0d0a"))
        let b = (try? String(contentsOfFile: "\(dir)/b.jsonl", encoding: .utf8)) ?? ""
        #expect(b.contains("\"device\":\"bike\""))
        kill(run.processIdentifier, SIGTERM)
        run.waitUntilExit()
        #expect(run.terminationStatus == 0, "\(stderr())")
    }

    /// A durable queue answers the device once the positions are on its disk, whether the server
    /// is up or not; a memory queue (`"queue": null`) keeps nothing through a crash, so the device
    /// hears only once the server took the positions.
    @Test(.timeLimit(.minutes(1)), arguments: [true, false])
    func aDeviceIsAnsweredOnceItsPositionsAreSafe(durableQueue: Bool) async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = LoopbackTCPServer.freePort(), serverPort = LoopbackTCPServer.freePort()
        let queue = durableQueue ? #"{"path":"upload.sqlite"}"# : "null"
        try Data("""
        {"settings":{"stats_interval":false,"shutdown_timeout":"1s"},
         "sources":{"fmb":{"type":"teltonika","listen":"127.0.0.1:\(port)","unknown_devices":"accept"}},
         "sinks":{"upload":{"type":"http","inputs":["fmb"],"url":"http://127.0.0.1:\(serverPort)/track",
                            "batch":{"max_positions":10,"interval":"100ms"},"retry":{"initial":"100ms","max":"300ms"},"queue":\(queue)}}}
        """.utf8).write(to: URL(fileURLWithPath: "\(dir)/pipeline.json"))
        let log = "\(dir)/stderr.log"
        let run = try LocgateBinary.launch([try LocgateBinary.path(), "run", "\(dir)/pipeline.json"], stderr: log)
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        let stderr: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(await Poll.until { stderr().contains("listening for Teltonika devices") }, "\(stderr())")
        let device = try LoopbackTCPClient(port: port)
        device.send(bytes(hex: "000F313233343536373839303132333435"))
        #expect(device.read(count: 1) == [0x01])
        // Two Codec 8 Extended records (Traccar's TeltonikaProtocolDecoderTest), the server down.
        device.send(bytes(hex: "000000000000010e8e020000019769de9f9800015299f718b278040018007708000000000013000b00ef0100f00000150500c80000450100010100b30000020000030000b401017c00000500b5001a00b6000c004238d40043000000440000000200f10000539b00100000efc70001004e000000000000000000000000019769de5d3b00015299f718b27804001800770800002c350001000000000000000000012c3500700124050f4e65766572615f33000000000000000f067cd9f4110c4006020c8f0701340e020c1c24050f4e65766572615f31000000000000000f067cd9f411334606020c380701340e020c2624050f4e65766572615f32000000000000000f067cd9f411464706020c240701360e020c26020000a8b0"))
        if durableQueue {
            #expect(device.read(count: 4) == [0, 0, 0, 2], "answered once on disk, the server still down")
        } else {
            #expect(device.read(count: 4, timeout: .seconds(2)).isEmpty, "answered while the positions were only in memory")
        }
        let record = "\(dir)/requests.jsonl"
        let server = try ScriptPeer(script: DrainTests.receiver, arguments: ["--record", record, "--port", "\(serverPort)"])
        defer { server.stop() }
        if !durableQueue {
            #expect(device.read(count: 4) == [0, 0, 0, 2], "answered once the server took them")
        }
        #expect(await Poll.until { Self.delivered(Self.received(record))["123456789012345"]?.count == 2 })
        kill(run.processIdentifier, SIGTERM)
        run.waitUntilExit()
    }
}
