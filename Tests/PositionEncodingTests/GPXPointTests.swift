import GatewayCore
import PositionEncoding
import Testing

/// A GPX track point: the GPX 1.1 elements a position fills, in the order the schema's sequence
/// requires (ele, time, geoidheight, fix, sat, hdop, vdop, pdop, ageofdgpsdata, extensions).
@Suite struct GPXPointTests {
    @Test func theDetailBecomesGeoidHeightAndAgeOfDGPSDataInSchemaOrder() {
        var p = Position(time: Timestamp(year: 2026, month: 3, day: 1), latitude: 47.1, longitude: 8.5, altitude: 410.25,
                         mode: .threeD, source: "rx", id: "rx-1",
                         detail: FixDetail(ellipsoidHeight: 457.912, speedError: 0.087, correctionAge: 2.5))
        p.quality = .rtkFixed
        p.satellites = 21
        p.hdop = 0.6; p.vdop = 0.9; p.pdop = 1.1
        p.speed = 1.25
        let text = String(decoding: PositionFormat.gpx.document([p]), as: UTF8.self)
        #expect(text.contains(#"<trkpt lat="47.1" lon="8.5"><ele>410.25</ele><time>2026-03-01T00:00:00.000Z</time>"#
            + "<geoidheight>47.662</geoidheight><fix>3d</fix><sat>21</sat><hdop>0.6</hdop><vdop>0.9</vdop><pdop>1.1</pdop>"
            + "<ageofdgpsdata>2.5</ageofdgpsdata><extensions><speed>1.25</speed></extensions></trkpt>"), "\(text)")
    }

    /// Without an MSL altitude there is nothing to take the ellipsoid height from; without a
    /// detail neither element is written.
    @Test func geoidHeightNeedsBothHeights() {
        let noMSL = Position(latitude: 47.1, longitude: 8.5, mode: .twoD, source: "rx", id: "rx-1",
                             detail: FixDetail(ellipsoidHeight: 457.912, correctionAge: 1))
        let plain = Position(latitude: 47.1, longitude: 8.5, altitude: 410, mode: .threeD, source: "rx", id: "rx-2")
        let text = String(decoding: PositionFormat.gpx.document([noMSL, plain]), as: UTF8.self)
        #expect(!text.contains("geoidheight"))
        #expect(text.components(separatedBy: "<ageofdgpsdata>1</ageofdgpsdata>").count == 2, "\(text)")
    }
}
