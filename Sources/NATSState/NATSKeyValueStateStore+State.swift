import GatewayCore

/// What a ``NATSKeyValueStateStore`` knows of its keys and writes, guarded by its lock.
extension NATSKeyValueStateStore {
    /// What the store knows of one key.
    struct KeyState {
        /// The revision last read or written; nil: no value (never seen, or deleted).
        var revision: UInt64?
        /// The sequence of the change last written, to skip older ones.
        var sequence: UInt64 = 0
        var bytes = 0
        /// Another gateway wrote it: every write is refused from now on.
        var conflicted = false
        /// The values of the writes that failed without an answer since the last that got one,
        /// oldest first: any of them may have been stored, even after a later read showed the
        /// value before them (in flight during a leader election). Kept until a write of the key
        /// is stored (a refused one is no such write), at most ``NATSKeyValueStateStore/uncertainKept``.
        var uncertain: [[UInt8]] = []
        /// A delete of the key got no answer: it may have been stored.
        var uncertainDelete = false
    }

    struct State {
        var pending: [Pending] = []
        var scheduled = false
        var closed = false
        var keys: [String: KeyState] = [:]
        var totals: [String: (devices: Int, bytes: Int)] = [:]
        var writes = 0
        var rounds = 0
        var conflicts = 0
        var unavailableLog = LogRateLimit()

        mutating func account(transform: String, key: String, bytes: Int?) {
            var t = totals[transform] ?? (0, 0)
            if let old = keys[key], old.revision != nil { t.devices -= 1; t.bytes -= old.bytes }
            if let bytes { t.devices += 1; t.bytes += bytes }
            keys[key, default: KeyState()].bytes = bytes ?? 0
            totals[transform] = t
        }
    }
}
