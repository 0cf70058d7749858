import GatewayCore

/// Gives a device's decoded positions their source, device, attributes and id.
///
/// The id is `<source>-<device>-<fix time in ms>`: a device that resends a frame whose answer
/// it never got produces the same ids, so every sink downstream can recognise the duplicates
/// (a JetStream stream drops them, an HTTP server sees the same Idempotency-Key contents).
/// Two fixes of one frame with the same time get `-1`, `-2`, … in frame order, which a resent
/// frame repeats. A fix without a time is numbered with a per-run token, never repeated.
public struct PositionStamp: Sendable {
    public let source: String
    private let untimedToken = RunToken.next()
    private var untimed: Int64 = 0

    public init(source: String) { self.source = source }

    /// Stamps `positions` (decoded from one frame) as the device `entry`. An id the codec set
    /// already (an NMEA decoder numbers its epochs itself) is kept.
    public mutating func stamp(_ positions: inout [Position], as entry: DeviceEntry) {
        let prefix = "\(source)-\(entry.name)-"
        var previous: Int64?
        var repeats = 0
        for i in positions.indices {
            positions[i].source = source
            positions[i].device = entry.name
            if !entry.attributes.isEmpty {
                positions[i].attributes.merge(entry.attributes) { own, _ in own }
            }
            guard positions[i].identifier.isEmpty else { continue }
            if let time = positions[i].time?.milliseconds {
                if time == previous {
                    repeats += 1
                    positions[i].id = "\(prefix)\(time)-\(repeats)"
                } else {
                    previous = time
                    repeats = 0
                    positions[i].identifier = PositionID(prefix: prefix, number: time)
                }
            } else {
                untimed += 1
                positions[i].id = "\(prefix)u\(untimedToken)-\(untimed)"
            }
        }
    }
}
