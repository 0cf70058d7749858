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
