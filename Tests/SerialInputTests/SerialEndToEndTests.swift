import Foundation
import GatewayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The built `locgate` reading real bytes from socat pseudo-terminals through libserialport
/// (with the test-only pty shim preloaded), writing to a file sink.
///
/// Serialized: each test runs socat and a locgate child, and the CPU measurement wants a quiet machine.
@Suite(.timeLimit(.minutes(5)), .serialized)
struct SerialEndToEndTests {
    @Test func positionsWrittenToThePtyArriveInOrderAndComplete() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 }, "log: \(locgate.log)")
        let n = 200
        // Varied write sizes: whole epochs, and epochs split mid-sentence.
        var pending: [UInt8] = []
        for i in 0..<n {
            pending += NMEAGenerator.epoch(i)
            if i % 3 == 2 {
                let cut = pending.count / 2
                pty.write(Array(pending[..<cut]))
                // A receiver's pause mid-sentence (pacing, not a wait for anything).
                try await Task.sleep(for: .milliseconds(2))
                pty.write(Array(pending[cut...]))
                pending = []
            }
        }
        pty.write(pending)
        #expect(await Poll.until { readPositions(out).count >= n }, "log: \(locgate.log)")
        let positions = readPositions(out)
        #expect(positions.count == n)
        for (i, p) in positions.enumerated() {
            #expect(abs(p.lat - NMEAGenerator.latitude(i)) < 1e-9, "position \(i) out of order or wrong: \(p)")
        }
        #expect(zip(positions, positions.dropFirst()).allSatisfy { $0.time < $1.time })
    }

    @Test func unplugAndReplugResumeWithoutRestartingLocgate() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 })
        for i in 0..<20 { pty.write(NMEAGenerator.epoch(i)) }
        // The last epoch is released by the idle flush, without a following epoch.
        #expect(await Poll.until { readPositions(out).count == 20 }, "log: \(locgate.log)")

        pty.stop()  // unplug
        #expect(await Poll.until { locgate.count("device disconnected") >= 1 || locgate.count("no such device") >= 1 }, "log: \(locgate.log)")
        try await Task.sleep(for: .seconds(2))  // stays unplugged over a few retries
        let replugged = ContinuousClock.now
        try await pty.start()  // replug on the same link path
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 2 }, "log: \(locgate.log)")
        print("serial replug: reopened \(ContinuousClock.now - replugged) after socat restarted (backoff_cap 1s)")
        for i in 20..<40 { pty.write(NMEAGenerator.epoch(i)) }
        #expect(await Poll.until { readPositions(out).count == 40 }, "log: \(locgate.log)")
        let lats = readPositions(out).map(\.lat)
        #expect(lats == (0..<40).map(NMEAGenerator.latitude) || zip(lats, (0..<40).map(NMEAGenerator.latitude)).allSatisfy { abs($0 - $1) < 1e-9 })
        locgate.stop()
        #expect(locgate.process.terminationStatus == 0)
        #expect(locgate.log.contains("serial.reconnects=1"), "log: \(locgate.log)")
    }

    @Test func aStalledLineReconnects() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out, stallTimeout: "1s"), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 })
        for i in 0..<5 { pty.write(NMEAGenerator.epoch(i)) }
        #expect(await Poll.until { locgate.count("stall_timeout") >= 1 }, "log: \(locgate.log)")
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") >= 2 }, "log: \(locgate.log)")
        for i in 5..<10 { pty.write(NMEAGenerator.epoch(i)) }
        #expect(await Poll.until { readPositions(out).count == 10 }, "log: \(locgate.log)")
        locgate.stop()
        #expect(locgate.log.contains("serial.stalls="), "log: \(locgate.log)")
    }

    @Test func garbageAndNULBytesAreCountedAndSkipped() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 })
        let noise: [UInt8] = [0, 0, 0, 0xFF, 0xFE, 0x13] + Array("line noise\r\n".utf8) + [0, 0]
        for i in 0..<30 {
            pty.write(noise)
            var epoch = NMEAGenerator.epoch(i)
            if i % 10 == 5 {
                // A NUL inside a sentence ruins it (and its checksum): that epoch keeps only the GGA.
                epoch[10] = 0
            }
            pty.write(epoch)
        }
        #expect(await Poll.until { readPositions(out).count == 30 }, "log: \(locgate.log)")
        locgate.stop()
        let stats = locgate.log.split(separator: "\n").last { $0.contains("pipeline.stats: sources.rx") } ?? ""
        print("serial garbage: \(stats)")
        let noiseBytes = stats.split(separator: " ").first { $0.hasPrefix("nmea.noise_bytes=") }.flatMap { Int($0.split(separator: "=")[1]) } ?? 0
        #expect(noiseBytes >= 30 * 8, "stats: \(stats)")
        #expect(stats.contains("nmea.rejected=3") || stats.contains("nmea.invalid_char=3") || stats.contains("nmea.bad_checksum=3"), "stats: \(stats)")
    }

    @Test func cpuStaysNearIdleAtTenHertz() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 })
        let cpu0 = locgate.cpuSeconds
        let start = ContinuousClock.now
        for i in 0..<100 {
            pty.write(NMEAGenerator.epoch(i))
            try await Task.sleep(until: start + .milliseconds(100 * (i + 1)), clock: .continuous)
        }
        let elapsed = (ContinuousClock.now - start).secondsDouble
        let cpu = locgate.cpuSeconds - cpu0
        print("serial cpu at 10 Hz: \(String(format: "%.3f", cpu)) s CPU in \(String(format: "%.1f", elapsed)) s = \(String(format: "%.2f", 100 * cpu / elapsed))% of one core")
        #expect(await Poll.until { readPositions(out).count == 100 })
        #expect(cpu < 0.5 * elapsed, "sanity bound: a busy loop would use a whole core")
    }

    @Test func initLinesAreWrittenWithTheirChecksums() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let extra = #""init": ["PMTK220,100", "PMTK314,0,1,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0"], "init_checksum": true"#
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: dir.path + "/out.jsonl", extra: extra), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 }, "log: \(locgate.log)")
        var received: [UInt8] = []
        let expected = Array("$PMTK220,100*2F\r\n$PMTK314,0,1,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0*28\r\n".utf8)
        #expect(await Poll.until {
            received += pty.readAvailable()
            return received.count >= expected.count
        })
        #expect(String(decoding: received, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
    }

    @Test func autoBaudSettlesOnARateThatYieldsNMEA() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let config = serialConfig(port: pty.reader, output: out).replacingOccurrences(of: #""baud": 9600"#, with: #""baud": "auto""#)
        let locgate = try LocgateProcess(config: config, directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        // Detection needs input: send epochs until the rate is settled (a pty takes any rate, so the first).
        var i = 0
        let settled = await Poll.until {
            pty.write(NMEAGenerator.epoch(i))
            i += 1
            return locgate.count("opened \(pty.reader)") == 1
        }
        #expect(settled, "log: \(locgate.log)")
        #expect(locgate.log.contains("baud auto: 4800 yields NMEA"))
        let first = i
        for j in first..<(first + 20) { pty.write(NMEAGenerator.epoch(j)) }
        #expect(await Poll.until { readPositions(out).last.map { abs($0.lat - NMEAGenerator.latitude(first + 19)) < 1e-9 } ?? false }, "log: \(locgate.log)")
        let lats = readPositions(out).map(\.lat)
        #expect(zip(lats, lats.dropFirst()).allSatisfy { $0 < $1 })
        #expect(Array(lats.suffix(20)).enumerated().allSatisfy { abs($1 - NMEAGenerator.latitude(first + $0)) < 1e-9 })
    }

    @Test func aBusyPortSaysAnotherProcessHoldsIt() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        // flock(1) takes the same exclusive advisory lock locgate takes on the ports it opens.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = [pty.reader, "sleep", "30"]
        try holder.run()
        defer { kill(holder.processIdentifier, SIGTERM); holder.waitUntilExit(); pty.stop() }
        try await Task.sleep(for: .milliseconds(300))
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: dir.path + "/out.jsonl"), directory: dir.path)
        defer { locgate.stop() }
        #expect(await Poll.until { locgate.count("another process holds it") >= 1 }, "log: \(locgate.log)")
    }

    @Test func aMissingPortSaysNoSuchDevice() async throws {
        let dir = ScratchDirectory()
        let locgate = try LocgateProcess(config: serialConfig(port: dir.path + "/ttyNothing", output: dir.path + "/out.jsonl"), directory: dir.path)
        defer { locgate.stop() }
        #expect(await Poll.until { locgate.count("no such device") >= 1 }, "log: \(locgate.log)")
        // Repeats go to debug, not warning: an unplugged receiver must not flood the log.
        try await Task.sleep(for: .seconds(1.5))
        #expect(locgate.log.split(separator: "\n").filter { $0.contains("warning") && $0.contains("no such device") }.count == 1)
    }

    @Test func withoutThePreloadAPtyIsRefusedWithAClearMessage() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        defer { pty.stop() }
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: dir.path + "/out.jsonl"), directory: dir.path, preload: false)
        defer { locgate.stop() }
        #expect(await Poll.until { locgate.count("is a pseudo-terminal") >= 1 }, "log: \(locgate.log)")
    }

    /// Shutdown finds the source waiting on a silent port: it stops at once, not when a read
    /// slice runs out. Measured between locgate's own log lines ("shutting down" → the source's
    /// "stopped"), so process start-up and the sinks' drain do not count.
    @Test func aSourceWaitingOnASilentPortStopsPromptly() async throws {
        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: dir.path + "/out.jsonl", stallTimeout: "60s"), directory: dir.path)
        defer { locgate.stop(); pty.stop() }
        #expect(await Poll.until { locgate.count("opened \(pty.reader)") == 1 }, "log: \(locgate.log)")
        locgate.stop()
        let from = try #require(logTime(locgate.log, "pipeline: shutting down"), "log: \(locgate.log)")
        let to = try #require(logTime(locgate.log, "sources.rx: stopped"), "log: \(locgate.log)")
        // Nothing is due for a minute (stall_timeout), so only the cancellation can end the wait.
        // Loose for a loaded 2-core machine; the old 200 ms read slices took up to 200 ms here.
        #expect(to - from < 1.0, "the source took \(to - from) s to stop; log: \(locgate.log)")
    }

    @Test func locgatePortsPrintsATable() throws {
        let r = try Program.run(PackagePaths.locgate, ["ports"])
        let text = r.stdout
        print("locgate ports:\n\(text)")
        #expect(r.status == 0)
        #expect(text.hasPrefix("PATH") || text.hasPrefix("no serial ports found"))
    }
}
