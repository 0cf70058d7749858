/// Per-device state of a transform, bounded: beyond `capacity` devices the least recently
/// updated tenth is forgotten.
///
/// Device ids come from input (a UDP sender's address and ephemeral port, a device field in JSON),
/// so a table keyed by them must not grow without bound. A forgotten device starts afresh if it
/// comes back, as after a restart.
public struct DeviceTable<Value: Sendable>: Sendable {
    private var entries: [String: (value: Value, stamp: UInt64)] = [:]
    private var clock: UInt64 = 0
    public let capacity: Int
    /// Devices forgotten so far.
    public private(set) var evicted = 0

    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { entries.count }
    public var values: [Value] { entries.values.map(\.value) }
    public var keys: [String] { Array(entries.keys) }

    public subscript(key: String) -> Value? {
        get { entries[key]?.value }
        set {
            guard let newValue else {
                entries[key] = nil
                return
            }
            clock &+= 1
            if entries[key] == nil && entries.count >= capacity { evictOldest() }
            entries[key] = (newValue, clock)
        }
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> Value? {
        entries.removeValue(forKey: key)?.value
    }

    /// Changes every value in place (their recency stays as it was).
    public mutating func updateAll(_ body: (inout Value) -> Void) {
        for key in entries.keys {
            if var e = entries[key] {
                body(&e.value)
                entries[key] = e
            }
        }
    }

    private mutating func evictOldest() {
        let n = max(1, capacity / 10)
        let oldest = entries.sorted { $0.value.stamp < $1.value.stamp }.prefix(n).map(\.key)
        for k in oldest { entries[k] = nil }
        evicted += oldest.count
    }
}
