import Foundation
import GatewayTesting
import Testing

/// `locgate validate` checks what the pipeline needs from the machine, so that a configuration
/// that validates starts: each broken environment below is rejected with exit 2 and a message
/// naming the option's JSON path, the resolved file path and the reason, and `run` refuses it too.
@Suite(.serialized)
struct ValidateEnvironmentTests {
    /// One broken configuration or environment.
    struct Broken: Sendable, CustomTestStringConvertible {
        var name: String
        /// Creates what the case needs in the directory.
        var setup: @Sendable (String) throws -> Void = { _ in }
        /// The pipeline: `SOURCE` (a working replay of `x.nmea`) may be used as the sources map.
        var config: String
        /// The JSON path the problem must be reported at.
        var path: String
        /// Texts the line must contain; `DIR` stands for the test directory.
        var expected: [String]
        var testDescription: String { name }
    }

    static let source = #"{"r":{"type":"file","path":"x.nmea"}}"#
    static func fence(_ fences: String) -> String {
        #"{"sources":\#(source),"transforms":{"f":{"type":"geofence","inputs":["r"],"fences":"\#(fences)"}},"sinks":{"o":{"type":"stdout","inputs":["f"]}}}"#
    }
    static func fileSink(_ path: String) -> String {
        #"{"sources":\#(source),"sinks":{"o":{"type":"file","inputs":["r"],"path":"\#(path)"}}}"#
    }
    static func queue(_ path: String, extra: String = "") -> String {
        #"{"sources":\#(source),"sinks":{"u":{"type":"http","inputs":["r"],"url":"http://127.0.0.1:9/track","queue":{"path":"\#(path)"}\#(extra)}}}"#
    }
    static func write(_ text: String, _ file: String) -> @Sendable (String) throws -> Void {
        { dir in try Data(text.utf8).write(to: URL(fileURLWithPath: "\(dir)/\(file)")) }
    }
    static func mkdir(_ name: String) -> @Sendable (String) throws -> Void {
        { dir in try FileManager.default.createDirectory(atPath: "\(dir)/\(name)", withIntermediateDirectories: true) }
    }

    static let cases: [Broken] = [
        Broken(name: "missing fence file", config: fence("nofence.geojson"),
               path: "transforms.f.fences", expected: ["DIR/nofence.geojson", "No such file or directory"]),
        Broken(name: "fence file that is not JSON", setup: write("park;lat;lon\n", "park.geojson"), config: fence("park.geojson"),
               path: "transforms.f.fences", expected: ["DIR/park.geojson", "not valid JSON"]),
        Broken(name: "fence file that is JSON but not GeoJSON", setup: write(#"{"fences":[]}"#, "park.geojson"), config: fence("park.geojson"),
               path: "transforms.f.fences", expected: ["DIR/park.geojson", "\"FeatureCollection\""]),
        Broken(name: "fence without an id",
               setup: write(#"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"name":"park"},"geometry":{"type":"Point","coordinates":[4.9,52.4]}}]}"#, "park.geojson"),
               config: fence("park.geojson"), path: "transforms.f.fences", expected: ["DIR/park.geojson", "every fence needs an id"]),
        Broken(name: "fence path that is a directory", setup: mkdir("park.geojson"), config: fence("park.geojson"),
               path: "transforms.f.fences", expected: ["DIR/park.geojson", "Is a directory"]),
        Broken(name: "file sink whose directory does not exist", config: fileSink("out/track.jsonl"),
               path: "sinks.o.path", expected: ["DIR/out/track.jsonl", "DIR/out", "No such file or directory"]),
        Broken(name: "file sink whose path is a directory", setup: mkdir("track.jsonl"), config: fileSink("track.jsonl"),
               path: "sinks.o.path", expected: ["DIR/track.jsonl", "Is a directory"]),
        Broken(name: "file sink under a regular file", setup: write("", "out"), config: fileSink("out/track.jsonl"),
               path: "sinks.o.path", expected: ["DIR/out", "Not a directory"]),
        Broken(name: "file sink under /proc", config: fileSink("/proc/track.jsonl"),
               path: "sinks.o.path", expected: ["/proc", "pseudo-filesystem"]),
        Broken(name: "queue whose directory does not exist", config: queue("spool/upload.sqlite"),
               path: "sinks.u.queue.path", expected: ["DIR/spool", "No such file or directory"]),
        Broken(name: "queue path that is a directory", setup: mkdir("spool"), config: queue("spool"),
               path: "sinks.u.queue.path", expected: ["DIR/spool", "is a directory", "DIR/spool/queue.sqlite"]),
        Broken(name: "queue under /proc", config: queue("/proc/upload.sqlite"),
               path: "sinks.u.queue.path", expected: ["/proc/upload.sqlite", "pseudo-filesystem", "(proc)"]),
        Broken(name: "queue file that is not a database", setup: write("not sqlite, just text\n", "upload.sqlite"), config: queue("upload.sqlite"),
               path: "sinks.u.queue.path", expected: ["DIR/upload.sqlite", "file is not a database"]),
        Broken(name: "queue file that is another program's database",
               setup: { dir in #expect(Tmpfs.sh("sqlite3 '\(dir)/upload.sqlite' 'CREATE TABLE trips (id INTEGER)'") == 0) },
               config: queue("upload.sqlite"), path: "sinks.u.queue.path", expected: ["DIR/upload.sqlite", "not a locgate queue", "trips"]),
        Broken(name: "http CA file that does not exist", config: queue("upload.sqlite", extra: #","tls":{"ca_file":"ca.pem"}"#),
               path: "sinks.u.tls.ca_file", expected: ["DIR/ca.pem", "No such file or directory"]),
        Broken(name: "replay file that does not exist",
               config: #"{"sources":{"r":{"type":"file","path":"drive.nmea"}},"sinks":{"o":{"type":"stdout","inputs":["r"]}}}"#,
               path: "sources.r.path", expected: ["DIR/drive.nmea", "No such file or directory"]),
        Broken(name: "replay path that is a directory", setup: mkdir("drive.nmea"),
               config: #"{"sources":{"r":{"type":"file","path":"drive.nmea"}},"sinks":{"o":{"type":"stdout","inputs":["r"]}}}"#,
               path: "sources.r.path", expected: ["DIR/drive.nmea", "Is a directory"]),
    ]

    /// A directory with a valid one-epoch NMEA log `x.nmea`, and the pipeline file.
    static func prepare(_ config: String, setup: @Sendable (String) throws -> Void = { _ in }) throws -> (dir: String, file: String) {
        let dir = try makeTemporaryDirectory()
        try NMEASamples.writeLog(epochs: 3, to: "\(dir)/x.nmea")
        try setup(dir)
        let file = "\(dir)/pipeline.json"
        try Data(config.utf8).write(to: URL(fileURLWithPath: file))
        return (dir, file)
    }

    @Test(arguments: cases)
    func aBrokenEnvironmentFailsValidationWithThePathAndTheReason(_ c: Broken) throws {
        let (dir, file) = try Self.prepare(c.config, setup: c.setup)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try LocgateBinary.run(["validate", file])
        #expect(r.status == 2, "\(r.stdout)\(r.stderr)")
        let line = r.stderr.split(separator: "\n").first { $0.contains("\(c.path): ") }.map(String.init) ?? ""
        #expect(!line.isEmpty, "no problem at \(c.path): \(r.stderr)")
        for text in c.expected.map({ $0.replacingOccurrences(of: "DIR", with: dir) }) {
            #expect(line.contains(text), "\(text) missing from: \(line)")
        }
        // Skipping the checks passes it, and `run` then fails as validate said it would.
        #expect(try LocgateBinary.run(["validate", file, "--no-environment"]).status == 0)
        let run = try LocgateBinary.run(["run", file])
        #expect(run.status == 1, "run: \(run.stderr)")
    }

    /// As root, permissions stop no read, so the directory cases above stand in for this one.
    @Test(.enabled(if: getuid() != 0, "root reads a file whatever its mode"))
    func anUnreadableFenceFileIsRejectedWithPermissionDenied() throws {
        let (dir, file) = try Self.prepare(Self.fence("park.geojson"), setup: Self.write("{}", "park.geojson"))
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(chmod("\(dir)/park.geojson", 0) == 0)
        let r = try LocgateBinary.run(["validate", file])
        #expect(r.status == 2)
        #expect(r.stderr.contains("transforms.f.fences: fence file: cannot read \(dir)/park.geojson: Permission denied"), "\(r.stderr)")
    }

    static let goodFence = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"shanghai","name":"Shanghai"},"geometry":{"type":"Polygon","coordinates":[[[121,31],[122,31],[122,32],[121,32],[121,31]]]}}]}"#

    @Test(.timeLimit(.minutes(1)))
    func aConfigurationThatValidatesStartsAndRuns() throws {
        let config = #"""
        {"settings":{"shutdown_timeout":"500ms"},
         "sources":{"r":{"type":"file","path":"x.nmea"}},
         "transforms":{"f":{"type":"geofence","inputs":["r"],"fences":"park.geojson","action":"annotate"}},
         "sinks":{"o":{"type":"file","inputs":["f"],"path":"out/track.jsonl"},
                  "u":{"type":"http","inputs":["f"],"url":"http://127.0.0.1:PORT/track","queue":{"path":"out/upload.sqlite"}}}}
        """#.replacingOccurrences(of: "PORT", with: String(LoopbackTCPServer.freePort()))
        let (dir, file) = try Self.prepare(config) { dir in
            try Self.write(Self.goodFence, "park.geojson")(dir)
            try Self.mkdir("out")(dir)
        }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try LocgateBinary.run(["validate", file])
        #expect(first.status == 0, "\(first.stderr)")
        // A server that is down is a warning: the queue keeps the positions until it is up.
        #expect(first.stdout.contains("sinks.u.url: warning: the server is not reachable now"), "\(first.stdout)")
        #expect(first.stdout.contains("sinks.u.queue.path: info:") && first.stdout.contains("free for \(dir)/out/upload.sqlite"), "\(first.stdout)")
        #expect(first.stdout.contains("transforms.f.fences: info: 1 fence(s) in \(dir)/park.geojson"), "\(first.stdout)")
        // Validation created nothing.
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/out/upload.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/out/track.jsonl"))
        let run = try LocgateBinary.run(["run", file])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("3 position(s) stay queued in \(dir)/out/upload.sqlite"), "\(run.stderr)")

        // Now the queue and the output exist: they validate as they are, unchanged.
        let queueBefore = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/out/upload.sqlite"))
        let second = try LocgateBinary.run(["validate", file])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(dir)/out/upload.sqlite")) == queueBefore)
        #expect(try LocgateBinary.run(["run", file]).status == 0)
    }

    @Test func aSerialPortThatIsNotPluggedInIsOnlyAWarning() throws {
        let (dir, file) = try Self.prepare(#"{"sources":{"gps":{"type":"serial","port":"/dev/ttyLOCGATE-absent"}},"sinks":{"o":{"type":"stdout","inputs":["gps"]}}}"#)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try LocgateBinary.run(["validate", file])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("sources.gps.port: warning: /dev/ttyLOCGATE-absent: No such file or directory; the source waits for it to appear"), "\(r.stdout)")
    }

    @Test func typosGetSuggestions() throws {
        let (dir, file) = try Self.prepare(#"{"sources":{"log":{"type":"file","path":"x.nmea","rte":"max"}},"sink":{"o":{"type":"stdout","inputs":["log"]}}}"#)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try LocgateBinary.run(["validate", file])
        #expect(r.status == 2)
        #expect(r.stderr.contains(#"sources.log.rte: unknown option; did you mean "rate"?"#), "\(r.stderr)")
        #expect(r.stderr.contains(#"sink: unknown top-level key; did you mean "sinks"?"#), "\(r.stderr)")
        let plugins = try LocgateBinary.run(["plugins", "gpds"])
        #expect(plugins.status == 2)
        #expect(plugins.stderr.contains(#"no plugin of type "gpds"; did you mean "gpsd"? types: commands, coordinates,"#), "\(plugins.stderr)")
    }
}
