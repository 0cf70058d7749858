import Dispatch
import Foundation
import GatewayCore
import Geodesy
import HTTPServing
import MapRendering
import Synchronization

/// The live map's data that does not come from positions: the areas (fences, corridors) of
/// every transform that offers them, and the components whose counters are shown; replaced on a
/// reload.
struct LiveMapScene: Sendable {
    var fences: [MapFence] = []
    var notes: [String] = []

    /// Reads each transform's areas (``TransformPlugin/areas(of:)``, which loads them as the
    /// plugin does) and converts them into `display`; areas that cannot be read become a note.
    init(configuration: PipelineConfiguration, display: ChinaDatums.Datum) {
        for c in configuration.transforms {
            let areas: [Area]
            do {
                areas = try c.prepared.areas()
            } catch {
                notes.append("\(c.path): fences not shown: \(error)")
                continue
            }
            var converted: [String: Int] = [:]
            for area in areas {
                guard let from = MapProjection.datum(area.datum) else {
                    notes.append("\(c.path): \(area.id) not shown: its datum \(area.datum) is not one a map is drawn in")
                    continue
                }
                fences.append(MapFence(id: area.id, name: area.name, origin: c.path, sourceDatum: MapProjection.name(from),
                                       shape: MapProjection.shape(area.shape, from: from, to: display)))
                if from != display { converted[MapProjection.name(from), default: 0] += 1 }
            }
            for (from, n) in converted.sorted(by: { $0.key < $1.key }) {
                notes.append("\(c.path): \(n) fence(s) converted from \(from) to \(MapProjection.name(display)).")
            }
        }
    }
}

/// One `GET /events` connection: Server-Sent Events read from the ``PipelineActivity``, made on
/// the HTTP server's event thread whenever the connection is woken, never waiting there.
///
/// It starts with a snapshot, then sends what the monitor appended since (a fresh snapshot when
/// it fell more than the monitor's update log behind, or after a reload), the counters at most
/// once a second when they changed, and a comment line when nothing else went out for
/// ``LiveMapStream/heartbeat`` so proxies and the connection's idle timeout keep it open. Between
/// times its connection is suspended; the monitor's listener wakes it for new updates, and a
/// timer every ``LiveMapStream/countersInterval`` for counters and heartbeats.
final class LiveMapStream: HTTPStreamBody, @unchecked Sendable {
    static let heartbeat: Duration = .seconds(15)
    static let countersInterval: Duration = .seconds(1)

    // Unchecked Sendable: the mutable fields are used only on the server's event thread, which
    // calls `start`, `next` and `closed` one at a time; the timer and the listener only wake.
    private let api: OperatorAPI
    private var sequence: UInt64 = 0
    private var generation = -1
    private var counters: [UInt8] = []
    private var countersAt: Int64 = .min
    private var sentAt: Int64
    private var listener: Int?
    private var timer: (any DispatchSourceTimer)?

    init(api: OperatorAPI) {
        self.api = api
        sentAt = LiveMapStream.monotonicMilliseconds()
    }

    func start(waker: HTTPStreamWaker) {
        listener = api.monitor.addUpdateListener { waker.wake() }
        let every = DispatchTimeInterval.milliseconds(Int(LiveMapStream.countersInterval.milliseconds))
        let t = DispatchSource.makeTimerSource(queue: .global())
        t.schedule(deadline: .now() + every, repeating: every, leeway: .milliseconds(50))
        t.setEventHandler { waker.wake() }
        t.resume()
        timer = t
    }

    func next() -> HTTPStreamChunk {
        if api.isStopping { return .end }
        let now = LiveMapStream.monotonicMilliseconds()
        var out: [UInt8] = []
        let (scene, components, sceneGeneration) = api.liveScene
        if sceneGeneration != generation {
            generation = sceneGeneration
            snapshot(scene, components, into: &out)
        } else if let updates = api.monitor.updates(after: sequence) {
            for u in updates { message(u.position, into: &out) }
            if let last = updates.last { sequence = last.sequence }
        } else {
            snapshot(scene, components, into: &out)
        }
        if now - countersAt >= LiveMapStream.countersInterval.milliseconds {
            countersAt = now
            let c = LiveMapStream.counters(components)
            if c != counters {
                counters = c
                LiveMapStream.frame(Array(#"{"type":"components","components":"#.utf8) + c + [UInt8(ascii: "}")], into: &out)
            }
        }
        if !out.isEmpty || now - sentAt >= LiveMapStream.heartbeat.milliseconds {
            sentAt = now
            return .bytes(out.isEmpty ? Array(": heartbeat\n\n".utf8) : out)
        }
        return .later
    }

    func closed() {
        timer?.cancel()
        timer = nil
        if let listener { api.monitor.removeUpdateListener(listener) }
        listener = nil
        api.liveStreamClosed()
    }

    private func snapshot(_ scene: LiveMapScene, _ components: [MonitoredComponent], into out: inout [UInt8]) {
        let s = api.monitor.snapshot()
        sequence = s.sequence
        let display = api.displayDatum
        var data = MapData(datum: MapProjection.name(display), fences: scene.fences, notes: scene.notes)
        for (device, positions) in s.tails {
            let points = positions.compactMap { MapProjection.point($0, in: display) }
            guard !points.isEmpty else { continue }
            data.tracks.append(MapTrack(name: device, points: points, originalCount: points.count,
                                        start: positions.first?.time, end: positions.last?.time))
        }
        var body = Array(#"{"type":"snapshot","tail":"#.utf8)
        JSONWriter.appendInt(Int64(api.monitor.tail), to: &body)
        body += Array(#","map":"#.utf8) + data.json
        let c = LiveMapStream.counters(components)
        counters = c
        countersAt = LiveMapStream.monotonicMilliseconds()
        body += Array(#","components":"#.utf8) + c + [UInt8(ascii: "}")]
        LiveMapStream.frame(body, into: &out)
        // Events go one by one, in the shape they take live.
        for e in s.events { message(e, into: &out) }
    }

    /// A position or event as its message; nothing for a position the map cannot place.
    private func message(_ p: Position, into out: inout [UInt8]) {
        let point = MapProjection.point(p, in: api.displayDatum)
        var body: [UInt8] = []
        func key(_ k: String) { body.append(UInt8(ascii: ",")); JSONWriter.appendString(k, to: &body); body.append(UInt8(ascii: ":")) }
        func pointValue(_ m: MapPoint) {
            body.append(UInt8(ascii: "["))
            JSONWriter.appendNumber(m.latitude, decimals: MapData.coordinateDecimals, to: &body)
            body.append(UInt8(ascii: ","))
            JSONWriter.appendNumber(m.longitude, decimals: MapData.coordinateDecimals, to: &body)
            body.append(UInt8(ascii: "]"))
        }
        if let event = p.event {
            body += Array(#"{"type":"event","event":{"kind":"#.utf8)
            JSONWriter.appendString(event.kind.rawValue, to: &body)
            if let f = event.fenceId { key("fenceId"); JSONWriter.appendString(f, to: &body) }
            if let n = event.fenceName { key("fenceName"); JSONWriter.appendString(n, to: &body) }
            if let s = event.status { key("status"); JSONWriter.appendString(s, to: &body) }
            key("device"); JSONWriter.appendString(p.deviceKey, to: &body)
            if let t = p.time { key("time"); JSONWriter.appendString(t.iso8601, to: &body) }
            if let point { key("point"); pointValue(point) }
            if !p.attributes.isEmpty {
                // A motion event's details (trip length and time, stop, overspeed, idling) for its tooltip.
                key("attributes")
                JSONWriter.append(.object(JSONObject(p.attributes.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })), to: &body)
            }
            body += Array("}}".utf8)
        } else {
            guard let point else { return }
            body += Array(#"{"type":"position","device":"#.utf8)
            JSONWriter.appendString(p.deviceKey, to: &body)
            key("point"); pointValue(point)
            if let t = p.time { key("time"); JSONWriter.appendString(t.iso8601, to: &body) }
            body.append(UInt8(ascii: "}"))
        }
        LiveMapStream.frame(body, into: &out)
    }

    /// `data: <json>` and the blank line that ends an event (the JSON has no newline in it).
    static func frame(_ json: [UInt8], into out: inout [UInt8]) {
        out += Array("data: ".utf8)
        out += json
        out += Array("\n\n".utf8)
    }

    /// The components' counters as a JSON array (the statistics `/metrics` shows).
    static func counters(_ components: [MonitoredComponent]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, c) in components.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += Array(#"{"id":"#.utf8); JSONWriter.appendString(c.stats.id, to: &out)
            out += Array(#","type":"#.utf8); JSONWriter.appendString(c.type, to: &out)
            out += Array(#","received":"#.utf8); JSONWriter.appendInt(Int64(c.stats.received), to: &out)
            out += Array(#","emitted":"#.utf8); JSONWriter.appendInt(Int64(c.stats.emitted), to: &out)
            out += Array(#","dropped":"#.utf8); JSONWriter.appendInt(Int64(c.stats.dropped), to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// Intervals here must not jump with the wall clock.
    static func monotonicMilliseconds() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Int64(t.tv_sec) * 1000 + Int64(t.tv_nsec) / 1_000_000
    }
}
