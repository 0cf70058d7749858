// What phones and gateways post to the `http_server` source: the first byte picks the format
// (OwnTracks, OsmAnd query, OsmAnd form body, OsmAnd JSON body, locgate JSON, a template), the
// rest is the query or the body. Whatever is decoded must be a valid position (with a time and
// coordinates, but in locgate's own JSON); a request refused must say why with a 4xx status.
import FuzzSupport
import GatewayCore
import HTTPInput
import HTTPServing
import PositionEncoding

/// The motivating upload body, as the `template` format reads it.
let template: TemplateReader = {
    let document: JSONValue = .object(JSONObject([("vipId", .string("$device")), ("list", .string(BodyTemplate.marker))]))
    let fields = [
        FieldMapping(name: "date", value: .time(.iso8601)),
        FieldMapping(name: "latitude", value: .field(.lat, scale: nil, decimals: nil)),
        FieldMapping(name: "longitude", value: .field(.lon, scale: nil, decimals: nil)),
        FieldMapping(name: "steps", value: .field(.attribute("steps"), scale: nil, decimals: nil)),
        // Fields read as whole numbers (a double too large for an Int must be refused, not trap).
        FieldMapping(name: "mode", value: .field(.mode, scale: nil, decimals: nil)),
        FieldMapping(name: "status", value: .field(.status, scale: nil, decimals: nil)),
        FieldMapping(name: "sats", value: .field(.uSat, scale: nil, decimals: nil)),
    ]
    return TemplateReader(BodyTemplate(prefix: [], suffix: [], fields: fields, document: document))
}()

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    guard let format = input.first else { return 0 }
    let rest = Array(input.dropFirst())
    var request = HTTPRequest(method: "POST", path: "/", headers: ["content-type": "application/json", "x-limit-u": "ana", "x-limit-d": "phone"])
    let now = Timestamp(milliseconds: 1_700_000_000_000)
    let positions: [Position]
    do throws(RequestRejection) {
        switch format % 6 {
        case 0:
            request.body = rest
            positions = try RequestFormats.owntracks(request, source: "phones", basicUser: nil).positions.map(\.position)
        case 1:
            request.method = "GET"
            request.query = RequestFormats.formParameters(rest)
            positions = try RequestFormats.osmand(request, source: "phones", now: now).positions.map(\.position)
        case 2:
            request.headers["content-type"] = "application/x-www-form-urlencoded"
            request.body = rest
            positions = try RequestFormats.osmand(request, source: "phones", now: now).positions.map(\.position)
        case 3:
            request.body = rest
            positions = try RequestFormats.osmand(request, source: "phones", now: now).positions.map(\.position)
        case 4:
            request.body = rest
            positions = try RequestFormats.json(request, source: "phones", fallbackDevice: nil).positions.map(\.position)
        default:
            let read = try template.read(try RequestFormats.parseJSON(rest), source: "phones")
            positions = read.positions
        }
    } catch {
        fuzzCheck((400..<500).contains(error.status) && !error.reason.isEmpty, "http requests: refused with \(error.status) \(error.reason)")
        return 0
    }
    PositionChecks.check(positions, "http requests")
    // locgate's own JSON lets a position go without a time or a fix (as a file or a broker
    // message may: a receiver that has none says so); the phone formats always carry both, the
    // time given as the time of receipt where the phone sent none.
    guard format % 6 != 4 else { return 0 }
    for p in positions {
        fuzzCheck(p.time != nil, "http requests: a position without a time")
        fuzzCheck(p.hasCoordinates, "http requests: a position without coordinates")
    }
    return 0
}

FuzzDriver.run(testOneInput)
