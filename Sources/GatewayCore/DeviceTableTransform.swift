/// A stateful transform whose per-device state is one value per device in a ``DeviceTable``
/// (distance_filter, throttle, dedupe, jump_filter, geofence): which devices changed, their
/// snapshots and their restoring come from the table, and the transform says only how one
/// device's value is written to a snapshot and read back.
///
/// Implementation requirements: keep every device's state in ``devices`` and change it through
/// its subscript, so the table records the change; write every member in ``write(_:to:)`` that
/// ``value(from:)`` reads (a member left out reads back as nil).
public protocol DeviceTableTransform: StatefulTransform {
    associatedtype DeviceValue: Sendable
    /// The per-device state; the pipeline reaches it only through the defaults below.
    var devices: DeviceTable<DeviceValue> { get set }
    /// Writes one device's value into its snapshot.
    func write(_ value: DeviceValue, to snapshot: inout SnapshotWriter)
    /// Reads one device's value from its snapshot; throws when it cannot be read.
    func value(from snapshot: SnapshotReader) throws(StateSnapshotError) -> DeviceValue
}

// MARK: - Default implementations

extension DeviceTableTransform {
    public mutating func recordStateChanges() { devices.recordChanges() }

    public mutating func takeChangedDevices() -> [String] { devices.takeChanged() }

    public func snapshot(device: String) -> JSONValue? {
        guard let value = devices[device] else { return nil }
        var w = SnapshotWriter()
        write(value, to: &w)
        return w.value
    }

    public mutating func restore(device: String, from snapshot: JSONValue) throws(StateSnapshotError) {
        devices[device] = try value(from: SnapshotReader(snapshot))
    }
}
