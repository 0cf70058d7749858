import Foundation
import GatewayCore
import Testing
import TrackerProtocols

/// The `ref-decode` of the text protocols' fixtures (`gps103.txt`, `watch.txt`, `gl200.txt`,
/// `meitrack.txt`, `suntech.txt`): the device, and the fixes an independent decoder read.
struct TextRef: Decodable, Sendable {
    var imei: String?
    var id: String?
    var deviceId: String?
    var uniqueId: String?
    var index: String?
    var type: String?
    var command: String?
    var header: String?
    var checksumOK: Bool?
    var lengthOK: Bool?
    var ref: Fix?
    var positions: [Fix]?
    var packets: [Fix]?

    /// One fix: time in UTC, degrees, speed in knots or km/h as the protocol gives it.
    struct Fix: Decodable, Sendable {
        var time: String?
        var valid: Bool?
        var lat: Double
        var lon: Double
        var speedKnots: Double?
        var speedKmh: Double?
        var course: Double?
        var altitudeM: Double?
        var satellites: Int?
    }

    /// The device the frame names, whichever field the protocol's reference calls it.
    var device: String? { imei ?? uniqueId ?? deviceId ?? id }

    /// Every fix, in frame order.
    var fixes: [Fix] { positions ?? packets ?? ref.map { [$0] } ?? [] }

    static func of(_ vector: TrackerVector) throws -> TextRef {
        try JSONDecoder().decode(TextRef.self, from: Data(try #require(vector.refJSON, "\(vector.id) has no ref-decode").utf8))
    }
}

/// Checks shared by the text protocols' vector suites.
enum TextVectorCheck {
    /// A position against the reference's fix: time, coordinates within 1e-6° (a fix the device
    /// marks invalid at 0,0 has none), speed within 0.001 m/s (the reference rounds knots), course,
    /// altitude and satellites where the frame gives them, and the fix mode. An empty field is
    /// unknown here (nil) where the reference writes 0.
    static func check(_ position: Position, _ fix: TextRef.Fix, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(position.time == fix.time.flatMap(TrackerVectors.time), "\(id): time \(String(describing: position.time))", sourceLocation: sourceLocation)
        if fix.valid == false && fix.lat == 0 && fix.lon == 0 {
            #expect(position.latitude == nil && position.longitude == nil, "\(id): an invalid fix at 0,0 keeps no coordinates", sourceLocation: sourceLocation)
        } else {
            VectorCheck.near(position.latitude, fix.lat, 1e-6, "latitude", id, sourceLocation: sourceLocation)
            VectorCheck.near(position.longitude, fix.lon, 1e-6, "longitude", id, sourceLocation: sourceLocation)
        }
        if let knots = fix.speedKnots ?? fix.speedKmh.map({ $0 / 1.852 }) {
            VectorCheck.near(position.speed ?? (knots == 0 ? 0 : nil), knots * 1852 / 3600, 1e-3, "speed", id, sourceLocation: sourceLocation)
        }
        if let course = fix.course {
            VectorCheck.near(position.course ?? (course == 0 ? 0 : nil), course, 1e-9, "course", id, sourceLocation: sourceLocation)
        }
        if let altitude = fix.altitudeM, position.altitude != nil || altitude != 0 {
            VectorCheck.near(position.altitude, altitude, 1e-9, "altitude", id, sourceLocation: sourceLocation)
        }
        if let satellites = fix.satellites, position.satellites != nil || satellites != 0 {
            #expect(position.satellites == satellites, "\(id): satellites", sourceLocation: sourceLocation)
        }
        if let valid = fix.valid {
            #expect((position.mode != .noFix) == valid, "\(id): mode \(position.mode)", sourceLocation: sourceLocation)
        }
    }

    /// Decodes `frame` in one read, then one byte at a time, and expects the same messages.
    static func sameWhateverTheSplit<Codec: TrackerCodec>(_ make: () -> Codec, _ frame: [UInt8], _ id: String,
                                                           sourceLocation: SourceLocation = #_sourceLocation) {
        var whole = CodecRunner(make())
        whole.feed(frame)
        var bytes = CodecRunner(make())
        bytes.feed(frame, chunks: [1])
        #expect(firstDifference(whole.messages, bytes.messages) == nil, "\(id)", sourceLocation: sourceLocation)
    }
}

extension Array where Element == TrackerVector {
    /// The vector with this id (`V14`, `F2`).
    subscript(id id: String) -> TrackerVector? { first { $0.id == id } }
}

extension VectorCheck {
    /// The file holds `count` decoder vectors and the table states an outcome for each, no more.
    static func everyVectorHasAStatedOutcome(_ vectors: [TrackerVector], _ expected: [String: VectorExpectation], count: Int,
                                             sourceLocation: SourceLocation = #_sourceLocation) {
        let ids = vectors.filter { $0.id.hasPrefix("V") }.map(\.id)
        #expect(ids.count == count, sourceLocation: sourceLocation)
        #expect(Set(ids) == Set(expected.keys), sourceLocation: sourceLocation)
    }

    /// The table's ids in file order (`V2` before `V10`), for `@Test(arguments:)`.
    static func ids(_ expected: [String: VectorExpectation]) -> [String] {
        expected.keys.sorted { $0.count == $1.count ? $0 < $1 : $0.count < $1.count }
    }

    /// What a fresh codec makes of `bytes` in one read, which must use every byte sanely.
    static func decode<Codec: TrackerCodec>(_ codec: Codec, _ bytes: [UInt8], _ id: String,
                                            sourceLocation: SourceLocation = #_sourceLocation) -> [CodecEvent] {
        var runner = CodecRunner(codec)
        let events = runner.feed(bytes)
        #expect(runner.consumedWasSane && runner.buffer.isEmpty, "\(id): \(runner.buffer.count) bytes left", sourceLocation: sourceLocation)
        return events
    }

    /// The answer a text fixture's `server-answer` line owes (`none…`: nil), `\r\n` written out.
    static func textAnswer(_ line: String?) -> [UInt8]? {
        line.flatMap { $0.hasPrefix("none") ? nil : Array($0.replacingOccurrences(of: "\\r\\n", with: "\r\n").utf8) }
    }
}
