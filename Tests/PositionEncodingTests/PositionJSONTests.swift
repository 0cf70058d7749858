import GatewayCore
import PositionEncoding
import Testing

/// The position object: what a position's typed parts and events become, and read back as.
@Suite struct PositionJSONTests {
    /// The figures travel as gpsd's TPV names them, and read back as themselves.
    @Test func theDetailIsWrittenAndReadAsGpsdsFields() throws {
        let p = Position(latitude: 47.1, longitude: 8.5, altitude: 410.25, mode: .threeD, source: "rx", id: "rx-2",
                         detail: FixDetail(ellipsoidHeight: 457.912, speedError: 0.087, courseError: 12.34567, correctionAge: 2))
        let text = PositionJSON.string(p)
        #expect(text == #"{"class":"TPV","id":"rx-2","source":"rx","mode":3,"lat":47.1,"lon":8.5,"altMSL":410.25,"altHAE":457.912,"eps":0.087,"epd":12.34567,"dgpsAge":2,"datum":"wgs84"}"#)
        let read = try PositionJSON.decode(JSONValue.parse(string: text), source: "rx") { _ in "unused" }
        #expect(read == p)
        let bare = try PositionJSON.decode(JSONValue.parse(string: #"{"lat":1,"lon":2}"#), source: "rx") { _ in "rx-3" }
        #expect(bare.detail == nil)
    }

    /// A receiver's antenna report, as ReceiverHealth makes it (GatewayCoreTests), in the object.
    @Test func anAntennaEventIsWrittenWithItsStatus() {
        let p = Position(mode: .threeD, source: "rx", device: "gps0", id: "rx-1", event: PositionEvent(kind: .antenna, status: "open"))
        #expect(PositionJSON.string(p).contains(#""event":{"type":"antenna","status":"open"}"#))
    }

    @Test func healthEventsRoundTripThroughJSON() throws {
        var p = Position(time: Timestamp(milliseconds: Timestamp(year: 2026, month: 1, day: 1).milliseconds + 1000), latitude: 48.1, longitude: 11.5, mode: .noFix, source: "rx", device: "gps0", id: "e1")
        p.event = PositionEvent(kind: .noData)
        let text = PositionJSON.string(p)
        #expect(text.hasSuffix(#","event":{"type":"no_data"}}"#))
        let back = try PositionJSON.decode(JSONValue.parse(string: text), source: "x", makeID: { _ in "" })
        #expect(back.event == p.event)
    }
}
