import GatewayCore
import PositionEncoding

/// What every decoder's positions must satisfy, whatever the input: coordinates on Earth, and
/// a record every sink can write, whose JSON the `file` source and the NATS and MQTT sources
/// read back.
///
/// A decoder that passes a hostile value through unchecked (a latitude of 1e300, a string with
/// control characters) is caught here rather than in a sink in production.
public enum PositionChecks {
    /// Positions of a batch that are written in every format and read back.
    static let writtenPerBatch = 16

    /// Checks `positions` as one batch; `what` names the target in the failure message.
    public static func check(_ positions: [Position], _ what: String) {
        for p in positions {
            if p.datum.isGeographic {
                if let latitude = p.latitude {
                    fuzzCheck(latitude.isFinite && (-90...90).contains(latitude), "\(what): latitude \(latitude)")
                }
                if let longitude = p.longitude {
                    fuzzCheck(longitude.isFinite && (-180...180).contains(longitude), "\(what): longitude \(longitude)")
                }
            }
            fuzzCheck((p.latitude == nil) == (p.longitude == nil), "\(what): one coordinate without the other")
        }
        guard !positions.isEmpty else { return }
        // Every format a sink writes. Each JSON Lines record must be JSON that reads back as a
        // position; the GeoJSON document (its own writer) must be JSON. The JSON array holds the
        // JSON Lines records between commas, and CSV and GPX have no reader here: written only.
        // Of a long batch only the first positions: past a dozen, writing and reading back cost
        // several times the decoding (a 7 KB GPX track ran at 34 inputs a second), and a mutated
        // value reaches the first positions of some input soon enough.
        let written = Array(positions.prefix(Self.writtenPerBatch))
        for format in PositionFormat.allCases {
            let document = format.document(written)
            switch format {
            case .geojson:
                fuzzCheck((try? JSONValue.parse(document)) != nil, "\(what): \(format) document is not JSON")
            case .jsonl:
                for line in document.split(separator: 10) {
                    let value: JSONValue
                    do { value = try JSONValue.parse(line) } catch {
                        fatalError("invariant violated: \(what): JSON Lines record is not JSON (\(error)): \(String(decoding: line, as: UTF8.self))")
                    }
                    do { _ = try PositionJSON.decode(value, source: "fuzz") { _ in "" } } catch {
                        fatalError("invariant violated: \(what): a written record does not read back (\(error)): \(String(decoding: line, as: UTF8.self))")
                    }
                }
            case .jsonArray, .csv, .gpx:
                break
            }
        }
    }
}
