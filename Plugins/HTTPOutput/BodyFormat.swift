import GatewayCore
import PositionEncoding

/// How a batch becomes a request body: a header, records with a separator, and a trailer.
public enum BodyFormat: Sendable {
    /// A JSON array of position objects (``PositionJSON``).
    case jsonArray
    /// One position object per line.
    case jsonl
    /// A GeoJSON FeatureCollection.
    case geojson
    /// A user's JSON document with the records at a placeholder, each record mapped field by field.
    case template(BodyTemplate)

    /// Bytes before the first record.
    var header: [UInt8] {
        switch self {
        case .jsonArray: Array(PositionFormat.jsonArray.header.utf8)
        case .jsonl: []
        case .geojson: Array(PositionFormat.geojson.header.utf8)
        case .template(let t): t.prefix + [UInt8(ascii: "[")]
        }
    }

    var separator: [UInt8] {
        switch self {
        case .jsonArray, .template: [UInt8(ascii: ",")]
        case .jsonl: []
        case .geojson: Array(PositionFormat.geojson.separator.utf8)
        }
    }

    var trailer: [UInt8] {
        switch self {
        case .jsonArray: Array(PositionFormat.jsonArray.trailer.utf8)
        case .jsonl: []
        case .geojson: Array(PositionFormat.geojson.trailer.utf8)
        case .template(let t): [UInt8(ascii: "]")] + t.suffix
        }
    }

    var contentType: String {
        switch self {
        case .jsonl: "application/x-ndjson"
        case .geojson: "application/geo+json"
        default: "application/json"
        }
    }

    /// True when a queued record's JSON is already the record's encoding (no decode needed).
    var usesStoredJSON: Bool {
        switch self {
        case .jsonArray, .jsonl: true
        case .geojson: false
        case .template(let t): t.fields == nil
        }
    }

    /// Appends a record queued as its encoding (``HTTPSink/encodedKey``), without separator.
    func appendEncoded(_ record: [UInt8], to out: inout [UInt8]) {
        out.append(contentsOf: record)
        if case .jsonl = self { out.append(10) }
    }

    /// Appends one record (without separator) from a queued position object.
    func appendRecord(storedJSON: [UInt8], position: Position?, to out: inout [UInt8]) {
        switch self {
        case .jsonArray:
            out.append(contentsOf: storedJSON)
        case .jsonl:
            out.append(contentsOf: storedJSON)
            out.append(10)
        case .geojson:
            if let position { PositionFormat.geojson.appendRecord(position, to: &out) }
        case .template(let t):
            t.appendRecord(position, storedJSON: storedJSON, to: &out)
        }
    }
}

