@testable import ConsoleOutput
import Foundation
import GatewayCore
import GatewayTesting
import Testing

@Suite struct TextLineTests {
    func line(_ p: Position) -> String {
        var out: [UInt8] = []
        StdoutSink.appendText(p, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func aFixReadsAsOneLineWithUnits() {
        let p = Position(time: Timestamp(milliseconds: 1_584_538_100_600), latitude: 41.574970205, longitude: -93.750558641,
                         altitude: 278, speed: 1.67, course: 92.3, mode: .threeD, quality: .dgps, satellites: 9, hdop: 1.0,
                         horizontalError: 4.8, source: "rx")
        #expect(line(p) == "2020-03-18T13:28:20.600Z 3D DGPS 41.574970205 -93.750558641 278m 1.67m/s 92.3° 9sat hdop 1 eph 4.8m rx\n")
    }

    @Test func noFixNoTimeAndADeviceName() {
        #expect(line(Position(mode: .noFix, source: "rx", device: "van-7")) == "-                        -- no position van-7\n")
    }

    @Test func eventsAttributesDatumAndProjectedCoordinatesAreShown() {
        let p = Position(time: Timestamp(milliseconds: 0), latitude: 31.2, longitude: 121.5, mode: .twoD, datum: Datum(name: "gcj02"),
                         x: 355_000.25, y: 3_452_000.5, source: "rx", attributes: ["zone": "b", "area": "a"],
                         event: PositionEvent(kind: .enter, fenceId: "depot", fenceName: "Depot"))
        #expect(line(p) == "1970-01-01T00:00:00.000Z 2D 31.2 121.5 x=355000.25 y=3452000.5 gcj02 ENTER Depot area=a zone=b rx\n")
    }

    @Test func aHealthEventShowsItsStatus() {
        let p = Position(mode: .noFix, source: "rx", event: PositionEvent(kind: .antenna, status: "open"))
        #expect(line(p).hasSuffix(" ANTENNA open rx\n"))
    }
}

/// The stdout sink through the binary, as a user pipes it.
@Suite(.timeLimit(.minutes(2)), .serialized) struct StdoutBinaryTests {
    static func config(_ dir: String, format: String, rate: String = "max", epochs: Int = 20) throws -> String {
        try NMEASamples.writeLog(epochs: epochs, to: "\(dir)/in.nmea")
        let path = "\(dir)/p.json"
        try #"{"settings":{"stats_interval":false,"shutdown_timeout":"2s"},"sources":{"rx":{"type":"file","path":"in.nmea","rate":"\#(rate)"}},"sinks":{"out":{"type":"stdout","inputs":["rx"],"format":"\#(format)"},"copy":{"type":"file","inputs":["rx"],"path":"copy.jsonl"}}}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func jsonLinesOnStdoutAreTheFileSinksRecords() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try LocgateBinary.run(["run", try Self.config(dir, format: "jsonl")])
        #expect(r.status == 0, "\(r.stderr)")
        let file = try String(contentsOfFile: "\(dir)/copy.jsonl", encoding: .utf8)
        #expect(r.stdout == file)
        #expect(r.stdout.split(separator: "\n").count == 20)
    }

    @Test func textIsOneLinePerPosition() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try LocgateBinary.run(["run", try Self.config(dir, format: "text")])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 20)
        #expect(lines.allSatisfy { $0.hasPrefix("2024-05-01T00:") && $0.contains(" 3D ") })
    }

    @Test func aStdoutNobodyReadsDoesNotStopTheOtherSinks() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The stdout sink drops its oldest positions when its buffer is full, so the source never
        // waits for it: while it waits for room in the pipe, the file sink on the same pipeline
        // thread writes all 20,000 positions.
        try NMEASamples.writeLog(epochs: 20_000, to: "\(dir)/in.nmea")
        try #"{"settings":{"stats_interval":false,"shutdown_timeout":"2s"},"sources":{"rx":{"type":"file","path":"in.nmea"}},"sinks":{"out":{"type":"stdout","inputs":["rx"],"buffer":{"max_positions":100,"when_full":"drop_oldest"}},"copy":{"type":"file","inputs":["rx"],"path":"copy.jsonl"}}}"#
            .write(toFile: "\(dir)/p.json", atomically: true, encoding: .utf8)
        let (p, _, _) = try LocgateBinary.start(["run", "\(dir)/p.json"])
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        #expect(await Poll.until(timeout: .seconds(30)) {
            ((try? String(contentsOfFile: "\(dir)/copy.jsonl", encoding: .utf8))?.utf8.count { $0 == 0x0A } ?? 0) == 20_000
        })
        // The input has ended; the shutdown deadline cancels the stdout sink, still waiting.
        #expect(await Poll.until(timeout: .seconds(20)) { !p.isRunning })
    }

    @Test func aReaderThatStopsReadingDoesNotHoldShutdownPastItsDeadline() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 20,000 epochs of JSON are far more than a pipe (64 KiB) holds; nobody reads it. The
        // source waits for the blocked stdout sink, so the copy stops growing a little past that.
        let (p, _, err) = try LocgateBinary.start(["run", try Self.config(dir, format: "jsonl", epochs: 20_000)])
        #expect(await Poll.until(timeout: .seconds(30)) {
            ((try? FileManager.default.attributesOfItem(atPath: "\(dir)/copy.jsonl")[.size] as? Int) ?? 0) > 256 << 10
        })
        let start = ContinuousClock.now
        kill(p.processIdentifier, SIGTERM)
        #expect(await Poll.until(timeout: .seconds(20)) { !p.isRunning })
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        // shutdown_timeout is 2 s: the sink is cancelled then, whatever stdout does.
        #expect(ContinuousClock.now - start < .seconds(10))
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(stderr.contains("sinks.out"), "\(stderr)")
    }
}
