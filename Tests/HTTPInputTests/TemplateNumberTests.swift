import GatewayCore
@testable import HTTPInput
import PositionEncoding
import Testing

/// The `template` format's whole-number fields (`mode`, `status`, `uSat`): a client's number too
/// large for an Int used to reach `Int(_:)`, which traps — one request stopped the gateway.
@Suite struct TemplateNumberTests {
    static let reader: TemplateReader = {
        let document: JSONValue = .object(JSONObject([("list", .string(BodyTemplate.marker))]))
        let fields = [
            FieldMapping(name: "t", value: .time(.iso8601)),
            FieldMapping(name: "lat", value: .field(.lat, scale: nil, decimals: nil)),
            FieldMapping(name: "lon", value: .field(.lon, scale: nil, decimals: nil)),
            FieldMapping(name: "mode", value: .field(.mode, scale: nil, decimals: nil)),
            FieldMapping(name: "status", value: .field(.status, scale: nil, decimals: nil)),
            FieldMapping(name: "sats", value: .field(.uSat, scale: nil, decimals: nil)),
        ]
        return TemplateReader(BodyTemplate(prefix: [], suffix: [], fields: fields, document: document))
    }()

    static func read(_ extra: String) throws(RequestRejection) -> Position? {
        let body = #"{"list":[{"t":"2024-05-01T10:00:00Z","lat":31.2,"lon":121.4\#(extra)}]}"#
        return try reader.read(try RequestFormats.parseJSON(Array(body.utf8)), source: "phones").positions.first
    }

    @Test func numbersTooLargeForAnIntAreRefusedWithTheField() throws {
        for (field, what) in [("sats", "a satellite count"), ("mode", "a fix mode"), ("status", "a fix status")] {
            for value in ["1e300", "-1e300", "9.3e18", "2.5"] {
                do {
                    _ = try Self.read(#","\#(field)":\#(value)"#)
                    Issue.record("\(field): \(value) was taken")
                } catch {
                    #expect(error.status == 400)
                    #expect(error.reason.contains("\(field): expected \(what)"), "\(error.reason)")
                }
            }
        }
        #expect(throws: RequestRejection.self) { try Self.read(#","sats":1000"#) }
        #expect(throws: RequestRejection.self) { try Self.read(#","sats":-1"#) }
    }

    @Test func wholeNumbersReadAsBefore() throws {
        let p = try #require(try Self.read(#","sats":12,"mode":3,"status":2"#))
        #expect(p.satellites == 12)
        #expect(p.mode == .threeD)
        #expect(p.quality == .dgps)
        // A number that names no mode reads as unknown, as it did.
        #expect(try Self.read(#","mode":7"#)?.mode == .unknown)
    }
}
