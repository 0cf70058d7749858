import PluginCatalog
import Foundation
import GatewayCore
import GatewayTesting
import Geodesy
import Locking
import OperatorEndpoints
import Testing

/// A `curl -N` reading a Server-Sent Events stream: every line with when it arrived.
final class EventStreamClient: Sendable {
    let process: Process
    private final class Received: Sendable {
        let state = Locked<(partial: [UInt8], lines: [(at: ContinuousClock.Instant, text: String)])>(([], []))
    }
    private let received = Received()

    init(_ url: String, headers: [String] = []) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["curl", "-sN", "-i", "-m", "120"] + headers.flatMap { ["-H", $0] } + [url]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        process = p
        out.fileHandleForReading.readabilityHandler = { [received] handle in
            let data = handle.availableData
            let now = ContinuousClock.now
            received.state.withLock { s in
                for byte in data {
                    if byte == 10 {
                        s.lines.append((now, String(decoding: s.partial, as: UTF8.self).trimmingCharacters(in: .newlines)))
                        s.partial = []
                    } else {
                        s.partial.append(byte)
                    }
                }
            }
            if data.isEmpty { handle.readabilityHandler = nil }
        }
        try p.run()
    }

    var lines: [(at: ContinuousClock.Instant, text: String)] { received.state.withLock { $0.lines } }
    /// The `data:` payloads received so far.
    var messages: [String] { lines.filter { $0.text.hasPrefix("data: ") }.map { String($0.text.dropFirst(6)) } }
    /// The HTTP status (0 until the status line arrived).
    var status: Int {
        lines.first.flatMap { $0.text.split(separator: " ").dropFirst().first.flatMap { Int($0) } } ?? 0
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// `GET /` and `GET /events` over a running pipeline.
@Suite(.timeLimit(.minutes(1)))
struct LiveMapTests {
    /// A UDP source (the test sends its positions) and a geofence whose fence is given in `datum`.
    func pipeline(udp: Int, token: String? = nil, fenceDatum: String = "wgs84", fence: [Double] = [52.52, 13.40, 52.53, 13.41], tail: Int = 50) -> String {
        let (s, w, n, e) = (fence[0], fence[1], fence[2], fence[3])
        let rectangle = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"yard","name":"Yard"},"geometry":{"type":"Polygon","coordinates":[[[\#(w),\#(s)],[\#(e),\#(s)],[\#(e),\#(n)],[\#(w),\#(n)],[\#(w),\#(s)]]]}}]}"#
        return """
        { "settings": { "stats_interval": false, "shutdown_timeout": "2s" },
          "api": { "listen": "127.0.0.1:$API_PORT"\(token.map { #", "token": "\#($0)""# } ?? ""), "map": { "tail": \(tail) } },
          "sources": { "gps": { "type": "udp", "bind": "127.0.0.1", "port": \(udp), "device": "probe" } },
          "transforms": { "zone": { "type": "geofence", "inputs": ["gps"], "fences": \(rectangle), "fence_datum": "\(fenceDatum)", "events": ["enter", "exit"] } },
          "sinks": { "out": { "type": "file", "inputs": ["zone"], "path": "/dev/null" } } }
        """
    }

    /// One epoch at `lat`, `lon` (degrees), `n` seconds after noon.
    func epoch(_ n: Int, lat: Double, lon: Double) -> [UInt8] {
        let t = String(format: "12%02d%02d.00", (n / 60) % 60, n % 60)
        let la = String(format: "%02d%07.4f", Int(lat), (lat - Double(Int(lat))) * 60)
        let lo = String(format: "%03d%07.4f", Int(lon), (lon - Double(Int(lon))) * 60)
        return Array((NMEASamples.sentence("GPRMC,\(t),A,\(la),N,\(lo),E,1.5,90.0,010326,,,A")
            + NMEASamples.sentence("GPGGA,\(t),\(la),N,\(lo),E,1,09,0.9,34.0,M,40.0,M,,")).utf8)
    }

    func json(_ message: String) -> JSONValue? { try? JSONValue.parse(string: message) }

    @Test func thePageLoadsNothingFromOutside() async throws {
        try await APIHarness.run(pipeline(udp: LoopbackTCPServer.freePort(udp: true))) { h in
            let r = try h.get("/")
            #expect(r.status == 200)
            #expect(r.headers["content-type"] == "text/html; charset=utf-8")
            #expect(r.headers["content-security-policy"]?.contains("default-src 'none'") == true)
            #expect(r.body.hasPrefix("<!DOCTYPE html>"))
            #expect(r.body.contains("new EventSource('events' + location.search)"))
            #expect(Set(httpURLs(in: r.body)).isSubset(of: leafletURLs), "\(Set(httpURLs(in: r.body)))")
            #expect(!r.body.contains("src=\""), "no resource is loaded from anywhere")
        }
    }

    @Test func theStreamSendsANewPositionWithinASecond() async throws {
        let udp = LoopbackTCPServer.freePort(udp: true)
        let sender = try LoopbackUDPSender()
        try await APIHarness.run(pipeline(udp: udp)) { h in
            let client = try EventStreamClient("http://127.0.0.1:\(h.port)/events")
            defer { client.stop() }
            #expect(await Poll.until { client.messages.first?.hasPrefix(#"{"type":"snapshot""#) == true })
            #expect(client.status == 200)
            #expect(client.lines.contains { $0.text.lowercased() == "content-type: text/event-stream" })
            // Each epoch is emitted when the next one begins: the second datagram releases the first.
            // A stream that only looked once a second would miss 500 ms about half the time: five
            // in a row tell the wakeup from the once-a-second counters loop.
            for (i, lat) in [52.5111, 52.5122, 52.5133, 52.5144, 52.5155].enumerated() {
                let sent = ContinuousClock.now
                sender.send(epoch(i * 2, lat: lat, lon: 13.3), to: udp)
                sender.send(epoch(i * 2 + 1, lat: lat + 0.00001, lon: 13.3), to: udp)
                let wanted = #""device":"probe","point":[\#(String(format: "%.4f", lat))"#
                #expect(await Poll.until(timeout: .seconds(5)) { client.messages.contains { $0.contains(wanted) } }, "\(client.messages)")
                let arrived = client.lines.first { $0.text.contains(wanted) }?.at
                let latency = arrived.map { $0 - sent }
                #expect(latency.map { $0 < .milliseconds(500) } == true, "position \(i) took \(String(describing: latency))")
            }
            // The counters follow at most a second later.
            #expect(await Poll.until(timeout: .seconds(5)) {
                client.messages.last { $0.hasPrefix(#"{"type":"components""#) }?.contains(#"{"id":"sources.gps","type":"udp","received":0,"emitted":"#) == true
            })
        }
    }

    @Test func eventsAndFencesInTheDisplayDatum() async throws {
        let udp = LoopbackTCPServer.freePort(udp: true)
        let sender = try LoopbackUDPSender()
        // The fence is drawn on a BD-09 map of Shanghai: shown in WGS84 it must come back where the WGS84 rectangle is.
        let wgs = [31.2300, 121.4700, 31.2400, 121.4800]
        let corner = ChinaDatums.convert(GeoPoint(latitude: wgs[0], longitude: wgs[1]), from: .wgs84, to: .bd09)
        let far = ChinaDatums.convert(GeoPoint(latitude: wgs[2], longitude: wgs[3]), from: .wgs84, to: .bd09)
        let config = pipeline(udp: udp, fenceDatum: "bd09", fence: [corner.latitude, corner.longitude, far.latitude, far.longitude])
        try await APIHarness.run(config) { h in
            let client = try EventStreamClient("http://127.0.0.1:\(h.port)/events")
            defer { client.stop() }
            #expect(await Poll.until { !client.messages.isEmpty })
            let snapshot = try #require(client.messages.first.flatMap(json))
            let fence = try #require(snapshot["map"]?["fences"]?.arrayValue?.first)
            #expect(fence["id"] == .string("yard"))
            #expect(fence["sourceDatum"] == .string("bd09"))
            let ring = fence["polygons"]?.arrayValue?.first?.arrayValue?.first?.arrayValue ?? []
            let first = ring.first?.arrayValue?.compactMap(\.numberValue) ?? []
            #expect(first.count == 2)
            // Within a metre or so of the WGS84 corner (the BD-09 inverse is iterative), not 500 m off.
            #expect(abs((first.first ?? 0) - wgs[0]) < 2e-5 && abs((first.last ?? 0) - wgs[1]) < 2e-5, "\(first)")
            #expect(snapshot["map"]?["notes"]?.arrayValue?.first == .string("transforms.zone: 1 fence(s) converted from bd09 to wgs84."))

            // Outside, then inside twice: the geofence transform's enter event reaches the map.
            sender.send(epoch(0, lat: 31.2200, lon: 121.4750), to: udp)
            sender.send(epoch(1, lat: 31.2350, lon: 121.4750), to: udp)
            sender.send(epoch(2, lat: 31.2351, lon: 121.4750), to: udp)
            #expect(await Poll.until(timeout: .seconds(5)) { client.messages.contains { $0.hasPrefix(#"{"type":"event","event":{"kind":"enter","fenceId":"yard","fenceName":"Yard","device":"probe""#) } },
                    "\(client.messages)")
            // A second viewer gets it in its snapshot's events.
            let late = try EventStreamClient("http://127.0.0.1:\(h.port)/events")
            defer { late.stop() }
            #expect(await Poll.until { late.messages.contains { $0.contains(#""kind":"enter""#) } })
            #expect(late.messages.filter { $0.contains(#""kind":"enter""#) }.count == 1, "the event passed through one transform is kept once")
        }
    }

    @Test func aReloadSendsTheNewFences() async throws {
        let udp = LoopbackTCPServer.freePort(udp: true)
        try await APIHarness.run(pipeline(udp: udp)) { h in
            let client = try EventStreamClient("http://127.0.0.1:\(h.port)/events")
            defer { client.stop() }
            #expect(await Poll.until { client.messages.count >= 1 })
            let moved = pipeline(udp: udp, fence: [10, 20, 11, 21]).replacingOccurrences(of: "$API_PORT", with: String(h.port))
            let configuration = try PipelineConfiguration.load(json: Array(moved.utf8), registry: BuiltinPlugins.registry)
            _ = await h.pipeline.reload(configuration: configuration)
            h.api.update(configuration: configuration, stats: h.pipeline.componentStats)
            #expect(await Poll.until(timeout: .seconds(5)) {
                client.messages.filter { $0.hasPrefix(#"{"type":"snapshot""#) }.last?.contains("[[[[10,20],[10,21],[11,21],[11,20],[10,20]]]]") == true
            }, "\(client.messages)")
        }
    }

    @Test func theTokenIsRequiredAsAHeaderOrAQueryArgument() async throws {
        try await APIHarness.run(pipeline(udp: LoopbackTCPServer.freePort(udp: true), token: "s3cret")) { h in
            #expect(h.status("/") == 401)
            #expect(h.status("/events") == 401)
            #expect(h.status("/?token=wrong") == 401)
            #expect(h.status("/", ["-H", "Authorization: Bearer s3cret"]) == 200)
            #expect(h.status("/?token=s3cret") == 200)
            // Only the live map takes the query argument: scrapers and probes send the header.
            #expect(h.status("/metrics?token=s3cret") == 401)
            let refused = try EventStreamClient("http://127.0.0.1:\(h.port)/events?token=s3creT")
            defer { refused.stop() }
            #expect(await Poll.until { !refused.process.isRunning })
            #expect(refused.status == 401)
            let client = try EventStreamClient("http://127.0.0.1:\(h.port)/events?token=s3cret")
            defer { client.stop() }
            #expect(await Poll.until { client.messages.first?.hasPrefix(#"{"type":"snapshot""#) == true })
        }
    }

    @Test func atMostSixteenStreamsAreServed() async throws {
        try await APIHarness.run(pipeline(udp: LoopbackTCPServer.freePort(udp: true))) { h in
            var clients: [EventStreamClient] = []
            defer { clients.forEach { $0.stop() } }
            for _ in 0..<OperatorAPI.maximumLiveStreams {
                let c = try EventStreamClient("http://127.0.0.1:\(h.port)/events")
                clients.append(c)
                #expect(await Poll.until { c.messages.count >= 1 })
            }
            let extra = try EventStreamClient("http://127.0.0.1:\(h.port)/events")
            defer { extra.stop() }
            #expect(await Poll.until { !extra.process.isRunning })
            #expect(extra.status == 503)
            #expect(extra.lines.contains { $0.text == "too many live map streams (16); close one" })
            // Other endpoints still answer, and a closed stream frees its place.
            #expect(h.status("/health") == 200)
            // A viewer that left is noticed within a second or so, though nothing is being sent.
            clients.removeFirst().stop()
            #expect(await Poll.until(timeout: .seconds(5)) {
                let again = try? EventStreamClient("http://127.0.0.1:\(h.port)/events")
                defer { again?.stop() }
                return await Poll.until(timeout: .seconds(2)) { again?.messages.isEmpty == false || again?.process.isRunning == false }
                    && again?.status == 200
            })
        }
    }
}

/// The monitor's bounded memory for the live map.
@Suite struct LiveMapMonitorTests {
    func fix(_ device: String, _ n: Int) -> Position {
        Position(time: Timestamp(milliseconds: 1_772_366_400_000 + Int64(n) * 1000), latitude: 52 + Double(n) * 1e-5, longitude: 13,
                 mode: .threeD, source: "gps", device: device)
    }

    @Test func tailsAreBoundedAndAStreamTooFarBehindStartsOver() {
        let monitor = PipelineActivity(tail: 3)
        monitor.sourceEmitted("gps", (0..<5).map { fix("a", $0) } + [fix("b", 0)])
        let snapshot = monitor.snapshot()
        #expect(snapshot.tails.map(\.device) == ["a", "b"])
        #expect(snapshot.tails.first?.positions.map(\.latitude) == [2, 3, 4].map { 52 + Double($0) * 1e-5 })
        #expect(snapshot.sequence == 6)
        #expect(monitor.updates(after: 4)?.map(\.sequence) == [5, 6])
        monitor.sourceEmitted("gps", (5..<(5 + PipelineActivity.updateLogCapacity)).map { fix("a", $0) })
        #expect(monitor.updates(after: 6) != nil, "exactly the log's capacity behind")
        #expect(monitor.updates(after: 5) == nil, "one more and the oldest is gone")
    }

    @Test func anEventPassedOnByALaterTransformIsKeptOnce() {
        let monitor = PipelineActivity()
        var enter = fix("a", 1)
        enter.event = PositionEvent(kind: .enter, fenceId: "yard")
        monitor.transformEmitted("zone", [fix("a", 1), enter])
        monitor.transformEmitted("later", [enter])
        var exit = enter
        exit.event = PositionEvent(kind: .exit, fenceId: "yard")
        monitor.transformEmitted("zone", [exit])
        #expect(monitor.snapshot().events.map { $0.event?.kind } == [.enter, .exit])
        #expect(monitor.snapshot().tails.isEmpty, "positions passed on by transforms were counted at their source")
    }
}

extension LiveMapMonitorTests {
    @Test func tailsAreKeptForTheDevicesHeardFromMostRecently() {
        let clock = ManualClock()
        let monitor = PipelineActivity(clock: clock, tail: 2)
        for i in 0..<(PipelineActivity.maximumMapDevices + 5) {
            clock.advance(by: .milliseconds(1))
            monitor.sourceEmitted("gps", [fix(String(format: "d%05d", i), 0)])
        }
        let devices = monitor.snapshot().tails.map(\.device)
        #expect(devices.count == PipelineActivity.maximumMapDevices)
        #expect(devices.first == "d00005")
    }
}
