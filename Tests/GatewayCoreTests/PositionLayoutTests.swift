import Testing
@testable import GatewayCore

/// The compact storage of a position's optional numbers and event must behave exactly like the
/// `Double?` and `PositionEvent?` its properties expose.
@Suite struct PositionLayoutTests {
    @Test func everyDoubleReadsBackAsItself() {
        let values: [Double?] = [nil, 0, -0.0, 31.230428333, -93.75, .infinity, -.infinity, .nan,
                                 -Double.nan, Double(bitPattern: 0x7FF4_0000_0000_0001), .leastNonzeroMagnitude, .greatestFiniteMagnitude]
        for v in values {
            var p = Position()
            p.latitude = v; p.longitude = v; p.altitude = v; p.speed = v; p.course = v; p.hdop = v; p.vdop = v
            p.pdop = v; p.horizontalError = v; p.verticalError = v; p.heading = v; p.x = v; p.y = v
            let read = [p.latitude, p.longitude, p.altitude, p.speed, p.course, p.hdop, p.vdop, p.pdop,
                        p.horizontalError, p.verticalError, p.heading, p.x, p.y]
            for r in read {
                #expect((r == nil) == (v == nil), "\(String(describing: v))")
                if let r, let v { #expect(r.bitPattern == v.bitPattern) }
            }
        }
    }

    @Test func equalityAndHashingAreThoseOfTheOptionals() {
        let a = Position(latitude: 31.2, longitude: 121.4, hdop: 0.9, source: "rx", id: "rx-1")
        var b = a
        #expect(a == b && a.hashValue == b.hashValue)
        b.hdop = nil
        #expect(a != b)
        b.hdop = 0.9
        #expect(a == b)
        // NaN is not equal to itself in a `Double?` either.
        b.speed = .nan
        var c = b
        c.speed = .nan
        #expect(b != c)
        #expect(Position(speed: nil) == Position(speed: nil))
        #expect(Position(speed: 0) != Position(speed: nil))
    }

    @Test func theBoxedEventBehavesAsAValue() {
        var p = Position(event: PositionEvent(kind: .enter, fenceId: "depot", fenceName: "Depot"))
        let copy = p
        p.event?.fenceName = "Yard"
        #expect(p.event?.fenceName == "Yard")
        #expect(copy.event?.fenceName == "Depot")
        #expect(p != copy)
        p.event?.fenceName = "Depot"
        #expect(p == copy && p.hashValue == copy.hashValue)
        p.event = nil
        #expect(p.event == nil && p == Position())
    }

    @Test func theBoxedDetailBehavesAsAValue() {
        var p = Position(source: "rx", id: "rx-1")
        p.speedError = 0.08
        let copy = p
        p.speedError = 0.5
        p.ellipsoidHeight = 232.5
        #expect(copy.speedError == 0.08 && copy.ellipsoidHeight == nil)
        #expect(p.detail == FixDetail(ellipsoidHeight: 232.5, speedError: 0.5))
        // A detail with no figure left is no detail: the position equals one never given any.
        p.speedError = nil
        p.ellipsoidHeight = nil
        #expect(p.detail == nil && p == Position(source: "rx", id: "rx-1"))
        #expect(Position(detail: FixDetail()) == Position())
    }

    /// What the layout is for: 240 bytes on 64-bit Linux, 424 with plain optionals, event and detail.
    @Test func aPositionStaysSmall() {
        #expect(MemoryLayout<Position>.size <= 240, "\(MemoryLayout<Position>.size) bytes")
    }
}
