import Foundation
import GatewayTesting
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

@Suite(.timeLimit(.minutes(5)), .serialized) struct EndToEndTests {
    func write(_ text: String, to url: URL) throws {
        try Data(text.utf8).write(to: url)
    }

    func jsonLines(_ url: URL) throws -> [[String: Any]] {
        let text = try String(contentsOf: url, encoding: .utf8)
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    @Test func replayingALogWritesOnePositionPerEpochToEveryFormat() throws {
        let dir = try makeTemporaryDirectoryURL()
        let log = gpsdFixture("ublox-neo-m9n-nmea.log").path
        let config = dir.appendingPathComponent("p.json")
        try write("""
        {"settings":{"stats_interval":false},
         "sources":{"rx":{"type":"file","path":"\(log)","device":"m9n"}},
         "sinks":{"j":{"type":"file","inputs":["rx"],"path":"out.jsonl"},
                  "c":{"type":"file","inputs":["rx"],"path":"out.csv"},
                  "g":{"type":"file","inputs":["rx"],"path":"out.geojson"},
                  "x":{"type":"file","inputs":["rx"],"path":"out.gpx"}}}
        """, to: config)
        let r = try LocgateBinary.run(["run", config.path])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = try jsonLines(dir.appendingPathComponent("out.jsonl"))
        let fixes = lines.filter { ($0["mode"] as? Int ?? 0) >= 2 }
        #expect(fixes.count >= 60)
        #expect(lines.allSatisfy { $0["class"] as? String == "TPV" && $0["device"] as? String == "m9n" && $0["id"] is String })
        let times = lines.compactMap { $0["time"] as? String }
        #expect(times == times.sorted())
        #expect(Set(lines.compactMap { $0["id"] as? String }).count == lines.count)

        let csv = try String(contentsOf: dir.appendingPathComponent("out.csv"), encoding: .utf8).split(separator: "\n")
        #expect(csv.first?.hasPrefix("time,lat,lon,altMSL") == true)
        #expect(csv.count == lines.count + 1)

        let geo = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("out.geojson"))) as? [String: Any])
        #expect(geo["type"] as? String == "FeatureCollection")
        #expect((geo["features"] as? [Any])?.count == lines.count)

        let gpx = try XMLDocument(contentsOf: dir.appendingPathComponent("out.gpx"))
        #expect(try gpx.nodes(forXPath: "//*[local-name()='trkpt']").count == lines.filter { $0["lat"] != nil }.count)
    }

    @Test func appendingContinuesGeoJSONAndTheReplayIsDeterministic() throws {
        let dir = try makeTemporaryDirectoryURL()
        let log = gpsdFixture("bu353-glonass.log").path
        let config = dir.appendingPathComponent("p.json")
        try write("""
        {"settings":{"stats_interval":false},"sources":{"rx":{"type":"file","path":"\(log)"}},
         "sinks":{"g":{"type":"file","inputs":["rx"],"path":"out.geojson","mode":"append"},"j":{"type":"file","inputs":["rx"],"path":"out.jsonl"}}}
        """, to: config)
        #expect(try LocgateBinary.run(["run", config.path]).status == 0)
        #expect(try LocgateBinary.run(["run", config.path]).status == 0)
        let geo = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("out.geojson"))) as? [String: Any])
        let features = try #require(geo["features"] as? [[String: Any]])
        let lines = try jsonLines(dir.appendingPathComponent("out.jsonl"))
        #expect(features.count == lines.count)
        // Two runs of one log give the same ids, so a server can drop the repeats.
        let ids = lines.compactMap { $0["id"] as? String }
        #expect(ids.count % 2 == 0 && Array(ids[..<(ids.count / 2)]) == Array(ids[(ids.count / 2)...]))
    }

    @Test func rotatedGeoJSONFilesAreEachValidAndTogetherHoldEveryPosition() throws {
        let dir = try makeTemporaryDirectoryURL()
        let log = gpsdFixture("bu353-glonass.log").path
        try write("""
        {"settings":{"stats_interval":false},"sources":{"rx":{"type":"file","path":"\(log)","rate":"50x"}},
         "sinks":{"g":{"type":"file","inputs":["rx"],"path":"out.geojson","rotate_bytes":2048,"keep_files":50},
                  "j":{"type":"file","inputs":["rx"],"path":"out.jsonl"}}}
        """, to: dir.appendingPathComponent("p.json"))
        let r = try LocgateBinary.run(["run", dir.appendingPathComponent("p.json").path])
        #expect(r.status == 0, "\(r.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("out.geojson") }
        #expect(files.count > 2)
        var features = 0
        for f in files {
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent(f))) as? [String: Any], "\(f) is not valid JSON")
            features += (doc["features"] as? [Any])?.count ?? 0
        }
        #expect(features == (try jsonLines(dir.appendingPathComponent("out.jsonl"))).count)
    }

    @Test func appendingToALineCutShortKeepsTheNewRecordsWhole() throws {
        let dir = try makeTemporaryDirectoryURL()
        try write(#"{"class":"TPV","id":"x-1","mode":1}"# + "\n" + #"{"class":"TPV","id":"x-2","la"#, to: dir.appendingPathComponent("out.jsonl"))
        let log = gpsdFixture("bu353-glonass.log").path
        try write(#"{"settings":{"stats_interval":false},"sources":{"rx":{"type":"file","path":"\#(log)"}},"sinks":{"j":{"type":"file","inputs":["rx"],"path":"out.jsonl"}}}"#,
                  to: dir.appendingPathComponent("p.json"))
        let r = try LocgateBinary.run(["run", dir.appendingPathComponent("p.json").path])
        #expect(r.status == 0)
        #expect(r.stderr.contains("ended in the middle of a line"))
        let lines = try String(contentsOf: dir.appendingPathComponent("out.jsonl"), encoding: .utf8).split(separator: "\n")
        #expect(lines[1] == #"{"class":"TPV","id":"x-2","la"#)
        #expect(lines.dropFirst(2).allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil })
        #expect(lines.count > 10)
    }

    @Test func sigtermDuringARealtimeReplayLeavesValidFilesAndExitsZero() async throws {
        let dir = try makeTemporaryDirectoryURL()
        let log = gpsdFixture("ericsson-gru04-02-70sec.log").path
        let config = dir.appendingPathComponent("p.json")
        try write("""
        {"sources":{"rx":{"type":"file","path":"\(log)","rate":"realtime"}},
         "sinks":{"g":{"type":"file","inputs":["rx"],"path":"out.geojson"},"x":{"type":"file","inputs":["rx"],"path":"out.gpx"}}}
        """, to: config)
        let (p, _, err) = try LocgateBinary.start(["run", config.path])
        let geoURL = dir.appendingPathComponent("out.geojson")
        let twoFeatures = await Poll.until(timeout: .seconds(30)) {
            guard let d = try? Data(contentsOf: geoURL), let g = try? JSONSerialization.jsonObject(with: d) as? [String: Any] else { return false }
            return ((g["features"] as? [Any])?.count ?? 0) >= 2
        }
        #expect(twoFeatures)
        kill(p.processIdentifier, SIGTERM)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(stderr)")
        #expect(stderr.contains("SIGTERM: stopping"))
        let geo = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: geoURL)) as? [String: Any])
        let n = (geo["features"] as? [Any])?.count ?? 0
        #expect(n >= 2 && n < 70)
        _ = try XMLDocument(contentsOf: dir.appendingPathComponent("out.gpx"))
    }

    @Test func aBrokenConfigExitsTwoNamingEveryProblem() throws {
        let dir = try makeTemporaryDirectoryURL()
        let config = dir.appendingPathComponent("bad.json")
        try write("""
        {"sources":{"rx":{"type":"file","rate":"warp"}},
         "sinks":{"o":{"type":"stdout","inputs":["rx","ghost"],"format":"xml"},"p":{"type":"nope","inputs":["rx"]}}}
        """, to: config)
        for command in ["validate", "run"] {
            let r = try LocgateBinary.run([command, config.path])
            #expect(r.status == 2)
            #expect(r.stderr.contains("sources.rx.path: required option is missing"))
            #expect(r.stderr.contains("sources.rx.rate: expected \"max\""))
            #expect(r.stderr.contains("sinks.o.inputs[1]: \"ghost\" names no source or transform"))
            #expect(r.stderr.contains("sinks.o.format: expected one of \"jsonl\", \"text\", got \"xml\""))
            #expect(r.stderr.contains("sinks.p.type: unknown sink type \"nope\""))
        }
        let ok = try LocgateBinary.run(["validate", LocgateBinary.packageRoot.appendingPathComponent("Docs/examples/replay-to-files.json").path])
        #expect(ok.status == 0, "\(ok.stderr)")
    }

    @Test func aMissingInputFileIsARuntimeFailure() throws {
        let dir = try makeTemporaryDirectoryURL()
        let config = dir.appendingPathComponent("p.json")
        try write(#"{"sources":{"rx":{"type":"file","path":"/nonexistent/x.nmea"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#, to: config)
        let r = try LocgateBinary.run(["run", config.path])
        #expect(r.status == 1)
        #expect(r.stderr.contains("/nonexistent/x.nmea: cannot open for reading: No such file or directory"), "\(r.stderr)")
    }

    @Test func corruptAndTruncatedLogsNeverCrashIt() throws {
        let dir = try makeTemporaryDirectoryURL()
        var rng = SeededGenerator(seed: 20240501)
        var bytes = [UInt8](try Data(contentsOf: gpsdFixture("quectel-eg25-g.log")))
        // Flip bits, insert NULs and noise, cut it mid-sentence.
        for _ in 0..<400 { bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng) }
        for _ in 0..<50 { bytes.insert(contentsOf: [0, 0, 0x24, 0x24, 0xff], at: Int.random(in: 0..<bytes.count, using: &rng)) }
        bytes.removeLast(17)
        try Data(bytes).write(to: dir.appendingPathComponent("bad.nmea"))
        try write(#"{"settings":{"stats_interval":false},"sources":{"rx":{"type":"file","path":"bad.nmea"}},"sinks":{"o":{"type":"file","inputs":["rx"],"path":"o.jsonl"}}}"#,
                  to: dir.appendingPathComponent("p.json"))
        let r = try LocgateBinary.run(["run", dir.appendingPathComponent("p.json").path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("rejected="))
        #expect(try jsonLines(dir.appendingPathComponent("o.jsonl")).count > 10)
    }

    @Test func theDemoPrintsPositionsWithRunAndNoConfiguration() throws {
        let (p, out, _) = try LocgateBinary.start(["run"])
        var text = ""
        let handle = out.fileHandleForReading
        while text.split(separator: "\n").count < 3 {
            let d = handle.availableData
            if d.isEmpty { break }
            text += String(decoding: d, as: UTF8.self)
        }
        kill(p.processIdentifier, SIGINT)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(text.contains("2018-08-20T09:47:37.000Z 3D 52.85014 5.313581667"))
    }

    @Test func pluginsListsEveryOptionWithDefaults() throws {
        let r = try LocgateBinary.run(["plugins"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("source file —"))
        #expect(r.stdout.contains("rate (\"max\" | \"realtime\" | \"<N>x\"; default \"max\")"))
        #expect(r.stdout.contains("sink stdout —"))
    }
}
