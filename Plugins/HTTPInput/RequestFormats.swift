import Foundation
import GatewayCore
import HTTPServing
import PositionEncoding

/// A request that cannot be taken: the status and the reason sent back as its body.
package struct RequestRejection: Error, Sendable {
    package var status: Int
    package var reason: String
    /// The statistics counter (`requests.<reason>`).
    var counter: String

    init(_ status: Int, _ counter: String, _ reason: String) {
        self.status = status
        self.counter = counter
        self.reason = reason
    }
}

/// What a request carries, decoded.
package struct DecodedRequest: Sendable {
    /// Positions with the identifier of the device that sent each.
    package var positions: [(identifier: String, position: Position)] = []
    /// A message without positions (an OwnTracks transition, an OsmAnd report without
    /// coordinates): answered at once, counted under `messages.<kind>`.
    package var skipped: String?
}

/// The request formats of the `http_server` source. Each reads an ``HTTPRequest`` into positions
/// and the device identifiers they belong to; none touches the server or the pipeline.
package enum RequestFormats {
    /// Bodies of the JSON formats: a JSON media type, or none given.
    static func requireJSON(_ request: HTTPRequest, alsoAccepting extra: [String] = []) throws(RequestRejection) {
        guard let type = request.headers["content-type"]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased(),
              !type.isEmpty else { return }
        if type == "application/json" || type.hasSuffix("+json") || type == "text/plain" || extra.contains(type) { return }
        throw RequestRejection(415, "unsupported_media_type", "expected a JSON body (Content-Type: application/json), got \(type.prefix(80))")
    }

    package static func parseJSON(_ body: [UInt8]) throws(RequestRejection) -> JSONValue {
        do {
            return try JSONValue.parse(body)
        } catch {
            throw RequestRejection(400, "bad_body", "not JSON: \(error)")
        }
    }

    // MARK: - OwnTracks

    /// The OwnTracks app's HTTP mode: one message (or an array of them) per request, the user and
    /// device in `X-Limit-U`/`X-Limit-D` or `?u=`/`?d=` (the user defaults to the Basic user).
    /// The identifier is `user/device` (or `user` alone).
    package static func owntracks(_ request: HTTPRequest, source: String, basicUser: String?) throws(RequestRejection) -> DecodedRequest {
        try requireJSON(request)
        let user = request.headers["x-limit-u"] ?? request.query["u"] ?? basicUser
        let device = request.headers["x-limit-d"] ?? request.query["d"]
        guard let user, !user.isEmpty else {
            throw RequestRejection(400, "no_device", "no user: send X-Limit-U (the app's UserID) or ?u=")
        }
        if let basicUser, user != basicUser {
            throw RequestRejection(403, "wrong_user", "user \(user.prefix(64)) may not send as \(basicUser.prefix(64))")
        }
        let identifier = device.map { $0.isEmpty ? user : "\(user)/\($0)" } ?? user
        let messages: [JSONValue]
        switch try parseJSON(request.body) {
        case .array(let a): messages = a
        case let v: messages = [v]
        }
        var out = DecodedRequest()
        var skipped: String?
        for m in messages {
            let decoded: Result<Position, OwnTracks.Skip>
            do throws(OwnTracks.Skip) {
                decoded = .success(try OwnTracks.decode(m, source: source, device: nil))
            } catch {
                decoded = .failure(error)
            }
            switch decoded {
            case .success(let p): out.positions.append((identifier, p))
            case .failure(.otherType(let type)): skipped = String(type.prefix(20).filter { $0.isLetter || $0 == "_" })
            case .failure(.invalid(let why)): throw RequestRejection(400, "bad_body", "OwnTracks location: \(why)")
            }
        }
        if out.positions.isEmpty { out.skipped = skipped ?? "empty" }
        return out
    }

    // MARK: - OsmAnd / Traccar Client

    /// Traccar Client and OsmAnd: `id`, `lat`, `lon`, `timestamp`, `speed` (knots), `bearing`,
    /// `altitude`, `accuracy`, `hdop`, `batt`, … as query or form parameters; or the JSON body
    /// of Traccar Client's newer versions (`{"location": {...}, "device_id": ...}`).
    package static func osmand(_ request: HTTPRequest, source: String, now: Timestamp) throws(RequestRejection) -> DecodedRequest {
        let type = request.headers["content-type"]?.lowercased() ?? ""
        if type.hasPrefix("application/json") || (request.body.first == UInt8(ascii: "{") && !type.hasPrefix("application/x-www-form-urlencoded")) {
            return try osmandJSON(request, source: source)
        }
        var parameters = request.query
        if !request.body.isEmpty {
            for (k, v) in formParameters(request.body) { parameters[k] = v }
        }
        guard let identifier = parameters["id"] ?? parameters["deviceid"], !identifier.isEmpty else {
            throw RequestRejection(400, "no_device", "id is required")
        }
        var p = Position()
        p.source = source
        if let location = parameters["location"] {
            let parts = location.split(separator: ",")
            if parts.count == 2 { parameters["lat"] = String(parts[0]); parameters["lon"] = String(parts[1]) }
        }
        guard let latText = parameters["lat"], let lonText = parameters["lon"] else {
            // A report of cells or Wi-Fi only: nothing to keep.
            return DecodedRequest(skipped: "no_location")
        }
        guard let lat = Double(latText), let lon = Double(lonText), (-90...90).contains(lat), (-180...180).contains(lon) else {
            throw RequestRejection(400, "bad_body", "lat and lon must be degrees, got \(latText.prefix(30)), \(lonText.prefix(30))")
        }
        p.latitude = lat
        p.longitude = lon
        if let t = parameters["timestamp"] {
            guard let time = parseTime(t) else { throw RequestRejection(400, "bad_body", "timestamp: not a time: \(t.prefix(40))") }
            p.time = time
        } else {
            p.time = now
        }
        func number(_ k: String) throws(RequestRejection) -> Double? {
            guard let text = parameters[k], !text.isEmpty else { return nil }
            guard let v = Double(text), v.isFinite else { throw RequestRejection(400, "bad_body", "\(k): not a number: \(text.prefix(40))") }
            return v
        }
        p.speed = try number("speed").map { $0 * 1852 / 3600 }
        let bearing = try number("bearing")
        let heading = try number("heading")
        p.course = (bearing ?? heading).flatMap { (0...360).contains($0) ? $0 : nil }
        p.altitude = try number("altitude")
        p.horizontalError = try number("accuracy").flatMap { $0 >= 0 ? $0 : nil }
        p.hdop = try number("hdop")
        let valid = parameters["valid"].map { $0 != "false" && $0 != "0" } ?? true
        p.mode = !valid ? .noFix : (p.altitude == nil ? .twoD : .threeD)
        // The rest (batt, charge, ignition, an app's own keys) as attributes, within bounds: the
        // first 32 by name, so a resent request makes the same position.
        let extra = parameters.keys.filter { !osmandFields.contains($0) }
        for k in extra.count <= 32 ? extra : Array(extra.sorted().prefix(32)) {
            p.attributes[String(k.prefix(64))] = parameters[k].map { String($0.prefix(256)) }
        }
        return DecodedRequest(positions: [(identifier, p)])
    }

    /// The OsmAnd parameters read into position fields (the others become attributes).
    static let osmandFields: Set<String> = ["id", "deviceid", "lat", "lon", "location", "timestamp", "speed", "bearing", "heading",
                                            "altitude", "accuracy", "hdop", "valid", "token"]

    /// The JSON body: one `location` object (or an array of them) and `device_id`.
    static func osmandJSON(_ request: HTTPRequest, source: String) throws(RequestRejection) -> DecodedRequest {
        guard case .object(let root) = try parseJSON(request.body) else {
            throw RequestRejection(400, "bad_body", "expected an object with location and device_id")
        }
        guard let identifier = root["device_id"]?.scalarText ?? request.query["id"], !identifier.isEmpty else {
            throw RequestRejection(400, "no_device", "device_id is required")
        }
        let locations: [JSONValue]
        switch root["location"] {
        case .array(let a)?: locations = a
        case let v?: locations = [v]
        case nil: throw RequestRejection(400, "bad_body", "location is required")
        }
        var out = DecodedRequest()
        for l in locations {
            guard case .object(let o) = l, case .object(let coords)? = o["coords"] else {
                throw RequestRejection(400, "bad_body", "location.coords is required")
            }
            func number(_ v: JSONValue?) -> Double? { v?.numberValue }
            guard let lat = number(coords["latitude"]), let lon = number(coords["longitude"]), (-90...90).contains(lat), (-180...180).contains(lon) else {
                throw RequestRejection(400, "bad_body", "location.coords.latitude and longitude must be degrees")
            }
            guard let text = o["timestamp"]?.stringValue, let time = Timestamp(iso8601: text) else {
                throw RequestRejection(400, "bad_body", "location.timestamp must be an ISO 8601 time")
            }
            var p = Position(time: time, latitude: lat, longitude: lon)
            p.source = source
            p.altitude = number(coords["altitude"])
            p.mode = p.altitude == nil ? .twoD : .threeD
            p.speed = number(coords["speed"]).flatMap { $0 >= 0 ? $0 : nil }
            p.course = number(coords["heading"]).flatMap { (0...360).contains($0) ? $0 : nil }
            p.horizontalError = number(coords["accuracy"]).flatMap { $0 >= 0 ? $0 : nil }
            if case .object(let battery)? = o["battery"] {
                if let level = number(battery["level"]), (0...1).contains(level) { p.attributes["batt"] = String(Int((level * 100).rounded())) }
                if case .bool(let charging)? = battery["is_charging"] { p.attributes["charging"] = String(charging) }
            }
            if case .bool(let moving)? = o["is_moving"] { p.attributes["motion"] = String(moving) }
            if let event = o["event"]?.stringValue { p.attributes["event"] = String(event.prefix(64)) }
            if let odometer = number(o["odometer"]) { p.attributes["odometer"] = String(odometer) }
            out.positions.append((identifier, p))
        }
        return out
    }

    /// `1442068686` (s), `1442068686579` (ms), ISO 8601, or `yyyy-MM-dd HH:mm:ss` (UTC).
    static func parseTime(_ text: String) -> Timestamp? {
        if let v = Double(text) { return Timestamp(epochSeconds: v > 1e11 ? v / 1000 : v) }
        if let t = Timestamp(iso8601: text) { return t }
        return Timestamp(iso8601: text.replacingOccurrences(of: " ", with: "T") + "Z")
    }

    /// `a=1&b=two%20words` (an `application/x-www-form-urlencoded` body).
    package static func formParameters(_ body: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        for pair in body.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let k = parts.first.flatMap(percentDecoded), !k.isEmpty else { continue }
            out[k] = parts.count > 1 ? percentDecoded(parts[1]) ?? "" : ""
        }
        return out
    }

    static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        var i = bytes.startIndex
        func hex(_ b: UInt8) -> UInt8? {
            switch b {
            case 48...57: return b - 48
            case 65...70: return b - 55
            case 97...102: return b - 87
            default: return nil
            }
        }
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if b == UInt8(ascii: "%"), i + 2 < bytes.endIndex, let h = hex(bytes[i + 1]), let l = hex(bytes[i + 2]) {
                out.append(h << 4 | l)
                i += 2
            } else {
                out.append(b)
            }
            i += 1
        }
        return String(validating: out, as: UTF8.self)
    }

    // MARK: - locgate JSON

    /// An array of positions in locgate's JSON (the `jsonl`/`json` bodies of the http sink), or
    /// JSON Lines. Each position names its device; a position without one takes `fallbackDevice`.
    /// Ids the sender gave are kept (a relay keeps the first gateway's idempotency keys).
    package static func json(_ request: HTTPRequest, source: String, fallbackDevice: String?) throws(RequestRejection) -> DecodedRequest {
        try requireJSON(request, alsoAccepting: ["application/x-ndjson", "application/jsonl", "application/json-seq"])
        var values: [JSONValue] = []
        let trimmed = request.body.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        if trimmed.first == UInt8(ascii: "[") {
            guard case .array(let a) = try parseJSON(request.body) else { throw RequestRejection(400, "bad_body", "expected an array of positions") }
            values = a
        } else {
            for (n, line) in request.body.split(separator: 0x0A).enumerated() where line.contains(where: { $0 > 0x20 }) {
                do {
                    values.append(try JSONValue.parse(Array(line)))
                } catch {
                    throw RequestRejection(400, "bad_body", "line \(n + 1): not JSON: \(error)")
                }
            }
        }
        var out = DecodedRequest()
        for (n, v) in values.enumerated() {
            var p: Position
            do throws(PositionJSON.DecodeError) {
                p = try PositionJSON.decode(v, source: source) { _ in "" }
            } catch {
                throw RequestRejection(400, "bad_body", "position \(n + 1): \(error)")
            }
            p.source = source
            guard let device = p.device ?? fallbackDevice, !device.isEmpty else {
                throw RequestRejection(400, "no_device", "position \(n + 1): no device")
            }
            out.positions.append((device, p))
        }
        if out.positions.isEmpty { out.skipped = "empty" }
        return out
    }
}
