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
    /// Keys set, removed or forgotten since the last ``takeChanged()``; nil until
    /// ``recordChanges()`` (a transform whose state is not saved pays nothing).
    private var changed: Set<String>?

    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public var count: Int { entries.count }
    public var values: [Value] { entries.values.map(\.value) }
    public var keys: [String] { Array(entries.keys) }

    public subscript(key: String) -> Value? {
        get { entries[key]?.value }
        set {
            if changed != nil { changed!.insert(key) }
            guard let newValue else {
                entries[key] = nil
                return
            }
            clock &+= 1
            if entries[key] == nil && entries.count >= capacity { evictOldest() }
            entries[key] = (newValue, clock)
        }
    }

    /// Takes a device's value out to change it (put it back with the subscript); not a change
    /// by itself, so a value taken out and put back unchanged is still recorded once, by the put.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> Value? {
        entries.removeValue(forKey: key)?.value
    }

    /// Starts recording which keys change (for a transform whose state is saved).
    public mutating func recordChanges() {
        if changed == nil { changed = [] }
    }

    /// The keys set, removed or forgotten since the last call, each once.
    public mutating func takeChanged() -> [String] {
        guard let keys = changed, !keys.isEmpty else { return [] }
        changed = []
        return Array(keys)
    }

    /// Changes every value in place (their recency stays as it was).
    public mutating func updateAll(_ body: (inout Value) -> Void) {
        if changed != nil { changed!.formUnion(entries.keys) }
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
        // A forgotten device is forgotten in the store too: it starts afresh if it comes back.
        if changed != nil { changed!.formUnion(oldest) }
        evicted += oldest.count
    }
}
