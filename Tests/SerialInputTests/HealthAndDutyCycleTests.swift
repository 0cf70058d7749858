import Foundation
import GatewayCore
import GatewayTesting
import NMEA
import SerialInput
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Receiver health events and duty cycling, end to end: a script plays the receiver on a socat
/// pty (read by libserialport through the test shim), `locgate run` does the rest.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct HealthAndDutyCycleTests {
    /// RMC + GGA for wall-clock instant `date`, with a fix (status A, quality 1) or without (V, 0).
    static func epoch(at date: Date, fix: Bool) -> [UInt8] {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let c = Timestamp(milliseconds: ms).components
        let time = String(format: "%02d%02d%02d.%02d", c.hour, c.minute, c.second, c.millisecond / 10)
        let day = String(format: "%02d%02d%02d", c.day, c.month, c.year % 100)
        let rmc = fix ? "GPRMC,\(time),A,4807.038,N,01131.000,E,0.5,54.7,\(day),,,A" : "GPRMC,\(time),V,,,,,,,\(day),,,N"
        let gga = fix ? "GPGGA,\(time),4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,," : "GPGGA,\(time),,,,,0,00,99.9,,,,,,"
        return Array((NMEAChecksum.sentence(body: rmc) + NMEAChecksum.sentence(body: gga)).utf8)
    }

    /// Writes an epoch every 100 ms for `seconds`.
    static func feed(_ pty: PtyPair, seconds: Double, fix: Bool) async throws {
        for _ in 0..<Int(seconds * 10) {
            pty.write(epoch(at: Date(), fix: fix))
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    static var receiverScript: String { PackagePaths.root + "/Tests/HTTPOutputTests/Support/receiver.py" }

    /// Every position the receiver accepted, in the order the bodies arrived.
    static func received(_ path: String) -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        var out: [[String: Any]] = []
        for line in text.split(separator: "\n") {
            guard let rec = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  (rec["status"] as? Int) == 200, let body = rec["body"] as? String,
                  let array = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] else { continue }
            out += array
        }
        return out
    }

    static func eventType(_ p: [String: Any]) -> String? { (p["event"] as? [String: Any])?["type"] as? String }

    @Test func healthEventsReachAnHTTPSinkInOrderWithThePositions() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let record = dir.path + "/received.jsonl"
        let receiver = try ScriptPeer(script: Self.receiverScript, arguments: ["--record", record])
        defer { receiver.stop() }
        let config = """
            { "sources": { "rx": { "type": "serial", "port": "\(pty.reader)", "device": "gps0", "stall_timeout": "30s",
                                   "health": { "fix_timeout": "1s", "data_timeout": "600ms" } } },
              "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "http://127.0.0.1:\(receiver.port)/track",
                                 "batch": { "max_positions": 1000, "interval": "100ms" }, "queue": { "path": "\(dir.path)/q.sqlite" } } } }
            """
        let locgate = try LocgateProcess(config: config, directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 }, "log: \(locgate.log)")

        try await Self.feed(pty, seconds: 0.6, fix: true)         // fixes
        try await Self.feed(pty, seconds: 1.6, fix: false)        // sentences flow, status V / quality 0 → fix_lost
        try await Self.feed(pty, seconds: 0.4, fix: true)         // → fix_regained
        try await Task.sleep(for: .milliseconds(1400))            // silence → no_data (and fix_lost)
        pty.write(Array(NMEAChecksum.sentence(body: "GPTXT,01,01,02,ANTSTATUS=OPEN").utf8))  // → data_resumed, antenna open
        try await Task.sleep(for: .milliseconds(200))
        try await Self.feed(pty, seconds: 0.4, fix: true)         // → fix_regained

        let expected = ["fix_lost", "fix_regained", "no_data", "fix_lost", "data_resumed", "antenna", "fix_regained"]
        #expect(await Poll.until { Self.received(record).compactMap(Self.eventType).count >= expected.count }, "log: \(locgate.log)")
        let all = Self.received(record)
        let events = all.compactMap(Self.eventType)
        for e in all where Self.eventType(e) != nil {
            // The docs' examples are copied from here.
            if let data = try? JSONSerialization.data(withJSONObject: e, options: [.sortedKeys]) { print("event: " + String(decoding: data, as: UTF8.self)) }
        }
        #expect(events == expected, "log: \(locgate.log)")
        // In order with the positions: each event sits between the positions that caused it.
        let types = all.map { Self.eventType($0) ?? (($0["mode"] as? Int ?? 0) >= 2 ? "fix" : "nofix") }
        let firstLost = try #require(types.firstIndex(of: "fix_lost"))
        #expect(types[..<firstLost].contains("fix") && types[firstLost - 1] == "nofix", "\(types)")
        let firstRegained = try #require(types.firstIndex(of: "fix_regained"))
        #expect(types[firstRegained - 1] == "fix" && !types[(firstLost + 1)..<(firstRegained - 1)].contains("fix"), "\(types)")
        #expect(all[firstRegained]["time"] as? String == all[firstRegained - 1]["time"] as? String, "fix_regained is the fix that ended the outage")
        let lost = all[firstLost]
        #expect(lost["device"] as? String == "gps0" && lost["lat"] as? Double != nil, "fix_lost carries the last coordinates: \(lost)")
        let antenna = try #require(all.first { Self.eventType($0) == "antenna" })
        #expect((antenna["event"] as? [String: Any])?["status"] as? String == "open")
        // The event JSON shown in the docs has the shape of what the sink really received.
        let doc = try String(contentsOfFile: PackagePaths.root + "/Docs/Power-and-health.md", encoding: .utf8)
        let shown = doc.split(separator: "\n").filter { $0.hasPrefix("{") && $0.contains(#""event""#) }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        for type in Set(expected) {
            let real = try #require(all.first { Self.eventType($0) == type })
            let example = try #require(shown.first { Self.eventType($0) == type }, "Docs/Power-and-health.md shows no \(type) event")
            #expect(Set(example.keys) == Set(real.keys), "\(type): docs show \(example.keys.sorted()), the sink got \(real.keys.sorted())")
            #expect(NSDictionary(dictionary: example["event"] as? [String: Any] ?? [:]) == NSDictionary(dictionary: real["event"] as? [String: Any] ?? [:]))
        }
        #expect(locgate.count("fix lost") == 2 && locgate.count("antenna open") == 1, "log: \(locgate.log)")
        locgate.stop()
        #expect(locgate.log.contains("health.fix_lost=2"), "stats line: \(locgate.log)")
    }

    @Test func dutyCycleSleepsAndWakesOnTheWireAndEmitsOneFixPerWindow() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out, extra: #"""
            "duty_cycle": { "on": "1s", "every": "3s", "method": "ublox", "emit": "best" }
            """#), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 }, "log: \(locgate.log)")
        let period: Int64 = 3000, on: Int64 = 1000
        func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
        // Play a receiver that ignores sleep (so the filtering shows) for two whole windows after the next boundary.
        let firstWindow = (nowMs() / period + 1) * period
        let stop = firstWindow + 2 * period + on + 500
        var wire: [(ms: Int64, bytes: [UInt8])] = []
        var nextEpoch = nowMs()
        while nowMs() < stop {
            let got = pty.readAvailable()
            if !got.isEmpty { wire.append((nowMs(), got)) }
            if nowMs() >= nextEpoch {
                pty.write(Self.epoch(at: Date(), fix: true))
                nextEpoch += 100
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let pmreq = ReceiverPowerCommands.ubloxBackup
        let sleeps = wire.filter { $0.bytes == pmreq }.map(\.ms)
        let wakes = wire.filter { $0.bytes == [0xFF] }.map(\.ms)
        #expect(wire.allSatisfy { $0.bytes == pmreq || $0.bytes == [0xFF] }, "only whole commands on the wire: \(wire)")
        func offset(_ ms: Int64, from boundary: Int64) -> Int64 {
            let r = ((ms - boundary) % period + period) % period
            return r > period / 2 ? r - period : r
        }
        let alignedWakes = wakes.filter { $0 >= firstWindow - 300 }
        let alignedSleeps = sleeps.filter { $0 >= firstWindow }
        #expect(alignedWakes.count >= 3 && alignedSleeps.count >= 3, "wakes \(wakes) sleeps \(sleeps)")
        for w in alignedWakes { #expect(abs(offset(w, from: 0)) <= 300, "wake at \(w % period) ms into the period") }
        for s in alignedSleeps { #expect(abs(offset(s, from: on)) <= 300, "sleep at \(s % period) ms into the period") }
        // Measured on-time: from each wake on the wire to the sleep that follows it (Docs/Power-and-health.md).
        let awake = alignedWakes.compactMap { w in alignedSleeps.first { $0 > w }.map { $0 - w } }
        let mean = Double(awake.reduce(0, +)) / Double(max(1, awake.count))
        print("duty cycle on 1s every 3s: receiver awake \(awake) ms per window, mean \(Int(mean)) ms = \(Int(mean / Double(period) * 3600)) s per hour (always on: 3600 s)")

        #expect(await Poll.until { readPositions(out).count >= 3 }, "log: \(locgate.log)")
        var perWindow: [Int64: Int] = [:]
        for p in readPositions(out) {
            let t = try #require(Timestamp(iso8601: p.time)).milliseconds
            let into = ((t % period) + period) % period
            // The fix's own time says when the receiver produced it; allow the read delay at the window's edge.
            #expect(into < on + 300 || into > period - 300, "position at \(into) ms into the period, outside the window")
            perWindow[(t + 300) / period, default: 0] += 1
        }
        for k in (firstWindow / period)...((firstWindow / period) + 2) {
            #expect(perWindow[k] == 1, "window \(k): \(perWindow[k] ?? 0) position(s); all: \(perWindow)")
        }
    }

    @Test(arguments: [
        (#"{ "type": "file", "path": "x.nmea", "duty_cycle": { "on": "10s", "every": "2m" } }"#, "sources.rx.duty_cycle: not supported by this component: duty cycling works on the serial and gpsd sources only"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "3m", "every": "2m", "method": "ublox" } }"#, "sources.rx.duty_cycle.on: must be shorter than every (2m)"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "10s", "every": "2m", "method": "ubx" } }"#, "sources.rx.duty_cycle.method: unknown method \"ubx\"; expected one of \"ublox\", \"mtk\", \"commands\", \"close\"; did you mean \"ublox\"?"),
        (#"{ "type": "gpsd", "duty_cycle": { "on": "10s", "every": "2m", "method": "ublox" } }"#, "sources.rx.duty_cycle.method: unknown option"),
    ])
    func badDutyCyclesAreRejectedAtValidate(source: String, expected: String) throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/bad.json"
        try #"{ "sources": { "rx": \#(source) }, "sinks": { "out": { "type": "stdout", "inputs": ["rx"] } } }"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        let r = try Program.run(PackagePaths.locgate, ["validate", path])
        #expect(r.status == 2)
        #expect(r.output.contains(expected), "validate said: \(r.output)")
    }
}
