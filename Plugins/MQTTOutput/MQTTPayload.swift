import GatewayCore
import PositionEncoding

/// How one position becomes one MQTT message body.
public enum MQTTPayloadFormat: Sendable {
    /// The position object of ``PositionJSON`` (gpsd TPV names, with `id`).
    case json
    /// What the OwnTracks apps publish: `_type` `location`, or `transition` for geofence enter/exit.
    case owntracks
    /// A user's JSON document (`body.template`, `body.fields`) with the one position at `"$positions"`.
    case template(BodyTemplate)

    /// Appends the message body for `p`.
    public func append(_ p: Position, to out: inout [UInt8]) {
        switch self {
        case .json: PositionJSON.append(p, to: &out)
        case .owntracks: OwnTracks.append(p, to: &out)
        case .template(let t): t.appendDocument(p, to: &out)
        }
    }

    /// True for `json` (tests and log lines).
    public var isJSON: Bool { if case .json = self { true } else { false } }
    /// True for `owntracks`.
    public var isOwnTracks: Bool { if case .owntracks = self { true } else { false } }
}
