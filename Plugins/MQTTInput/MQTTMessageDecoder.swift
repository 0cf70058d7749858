import GatewayCore
import PositionEncoding

/// Turns one MQTT message into a position, or says why not (the counter to bump).
package struct MQTTMessageDecoder: Sendable {
    package enum Outcome {
        case position(Position)
        /// `counter` is the stats name (`mqtt.skipped.<reason>`), `detail` the log line's end.
        case skipped(counter: String, detail: String)
    }

    let format: MQTTSourceConfiguration.Format
    let device: MQTTDeviceTemplate?
    let maxBytes: Int
    let sourceID: String
    /// For ids of positions that have no time: never the same after a restart.
    let runToken = RunToken.next()

    /// A decoder for one `mqtt` source (package-visible for the fuzz target, Fuzz/MQTTMessages).
    package init(format: MQTTSourceConfiguration.Format, device: MQTTDeviceTemplate?, maxBytes: Int, sourceID: String) {
        self.format = format
        self.device = device
        self.maxBytes = maxBytes
        self.sourceID = sourceID
    }

    package func decode(topic: String, payload: [UInt8], sequence: UInt64) -> Outcome {
        guard payload.count <= maxBytes else {
            return .skipped(counter: "mqtt.skipped.too_large", detail: "\(payload.count) bytes, more than max_message_bytes (\(maxBytes))")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(payload)
        } catch {
            return .skipped(counter: "mqtt.skipped.malformed", detail: "not JSON: \(error)")
        }
        let topicDevice = (device ?? .lastTwoLevels).render(topic: topic)
        let isOwnTracks: Bool
        switch format {
        case .json: isOwnTracks = false
        case .owntracks: isOwnTracks = true
        case .auto: if case .object(let o) = value, o["_type"] != nil { isOwnTracks = true } else { isOwnTracks = false }
        }
        var p: Position
        if isOwnTracks {
            do throws(OwnTracks.Skip) {
                p = try OwnTracks.decode(value, source: sourceID, device: topicDevice.isEmpty ? nil : topicDevice)
            } catch {
                switch error {
                case .otherType(let type): return .skipped(counter: "mqtt.skipped.other_type", detail: "OwnTracks _type \"\(type.prefix(40))\"")
                case .invalid(let why): return .skipped(counter: "mqtt.skipped.invalid", detail: "OwnTracks location: \(why)")
                }
            }
            p.id = Self.id(source: sourceID, device: p.device, time: p.time, fallback: "n\(runToken)-\(sequence)")
        } else {
            do {
                p = try PositionJSON.decode(value, source: sourceID) { p in
                    // The device the position will carry: the template's when one is set, else its own or the topic's.
                    let d = device != nil ? topicDevice : (p.device ?? topicDevice)
                    return Self.id(source: sourceID, device: d.isEmpty ? nil : d, time: p.time, fallback: "n\(runToken)-\(sequence)")
                }
            } catch {
                return .skipped(counter: "mqtt.skipped.invalid", detail: "position JSON: \(error)")
            }
            guard p.hasCoordinates else { return .skipped(counter: "mqtt.skipped.no_position", detail: "no lat/lon") }
            // This component produced it, whatever the publisher wrote.
            p.source = sourceID
            if device != nil || p.device == nil { p.device = topicDevice.isEmpty ? nil : topicDevice }
        }
        return .position(p)
    }

    /// Source, device and fix time, so a message the broker delivers twice gets the same id.
    static func id(source: String, device: String?, time: Timestamp?, fallback: String) -> String {
        let d = device.map { "\($0)-" } ?? ""
        return "\(source)-\(d)\(time.map { String($0.milliseconds) } ?? fallback)"
    }
}
