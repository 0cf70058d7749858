import GatewayCore
import GatewayRuntime
import Locking
import Synchronization

/// What the operator API knows beyond the components' counters: the newest position of every
/// device, a short tail of each for the live map, recent events, and when each source last
/// produced, seen through the pipeline's observer hook.
///
/// The pipeline's side only appends to bounded memory under one short lock and, when a live map
/// is connected, calls its listener (``addUpdateListener(_:)``), which only resumes the stream's
/// suspended connection; the live map reads from here on the HTTP server's thread, so a slow
/// browser never holds up a position.
public final class PipelineActivity: PipelineObserver {
    /// Devices remembered at most; beyond it the one heard from longest ago is forgotten, so a
    /// source that invents device ids (a UDP port scanned by many senders) cannot grow memory.
    public static let maximumDevices = 10_000
    /// Events kept for the live map (geofence transitions and receiver health).
    public static let maximumEvents = 200
    /// Devices the live map keeps a tail for: with the longest tail, memory stays bounded
    /// (1,000 × 200 positions) however many device ids a source invents.
    public static let maximumMapDevices = 1_000
    /// Updates a live map connection can fall behind by before it is sent a fresh snapshot.
    public static let updateLogCapacity = 4096

    /// A device's newest position and when the gateway received it.
    public struct Latest: Sendable {
        public var position: Position
        public var receivedAt: Timestamp
    }

    /// How a source is doing.
    public struct SourceState: Sendable {
        public var lastEmitted: Timestamp?
        public var ended = false
        public var failed = false
    }

    /// One thing the live map is told: a position (with coordinates) or an event.
    public struct Update: Sendable {
        /// Increases by one per update, from 1.
        public var sequence: UInt64
        public var position: Position
        public var isEvent: Bool { position.event != nil }
    }

    /// What a live map connection starts from.
    public struct Snapshot: Sendable {
        /// The newest update included; later ones come from ``updates(after:)``.
        public var sequence: UInt64
        /// Each device's tail, oldest first, sorted by device id.
        public var tails: [(device: String, positions: [Position])]
        public var events: [Position]
    }

    private struct State {
        var devices: [String: Latest] = [:]
        var sources: [String: SourceState] = [:]
        var tails: [String: [Position]] = [:]
        var events: [Position] = []
        /// A ring: `log[i % capacity]` holds sequence i + 1 for the newest `capacity` sequences.
        var log: [Update] = []
        var sequence: UInt64 = 0
    }

    public let clock: any GatewayClock
    /// When monitoring began (a source that never produced is stalled from here).
    public let startedAt: Timestamp
    /// Positions per device in a tail.
    public let tail: Int
    private let state = Locked(State())
    /// Live map streams to tell about new updates, by the id ``addUpdateListener(_:)`` gave.
    private let listeners = Locked<(next: Int, wakes: [Int: @Sendable () -> Void])>((0, [:]))
    /// How many listeners there are, read without the lock: with none, appending costs nothing more.
    private let listenerCount = Atomic<Int>(0)

    public init(clock: any GatewayClock = .system, tail: Int = 50) {
        self.clock = clock
        self.startedAt = clock.now()
        self.tail = max(1, tail)
    }

    public func sourceEmitted(_ source: String, _ batch: [Position]) {
        guard !batch.isEmpty else { return }
        let now = clock.now()
        let updated = state.withLock { s in
            let before = s.sequence
            s.sources[source, default: SourceState()].lastEmitted = now
            for p in batch {
                let key = p.deviceKey
                if s.devices[key] == nil && s.devices.count >= PipelineActivity.maximumDevices,
                   let stalest = s.devices.min(by: { $0.value.receivedAt < $1.value.receivedAt })?.key {
                    s.devices[stalest] = nil
                    s.tails[stalest] = nil
                }
                s.devices[key] = Latest(position: p, receivedAt: now)
                if p.event != nil {
                    record(event: p, in: &s)
                    continue
                }
                guard p.hasCoordinates else { continue }
                if s.tails[key] == nil && s.tails.count >= PipelineActivity.maximumMapDevices,
                   let stalest = s.tails.keys.min(by: { (s.devices[$0]?.receivedAt ?? now) < (s.devices[$1]?.receivedAt ?? now) }) {
                    s.tails[stalest] = nil
                }
                s.tails[key, default: []].append(p)
                if let count = s.tails[key]?.count, count > tail { s.tails[key]?.removeFirst(count - tail) }
                append(p, to: &s)
            }
            return s.sequence != before
        }
        if updated { publish() }
    }

    /// Keeps the events transforms make (geofence transitions); positions passed on were seen at
    /// their source already.
    public func transformEmitted(_ transform: String, _ batch: [Position]) {
        guard batch.contains(where: { $0.event != nil }) else { return }
        let updated = state.withLock { s in
            let before = s.sequence
            for p in batch where p.event != nil { record(event: p, in: &s) }
            return s.sequence != before
        }
        if updated { publish() }
    }

    public func sourceEnded(_ source: String, failed: Bool) {
        state.withLock { s in
            s.sources[source, default: SourceState()].ended = true
            s.sources[source, default: SourceState()].failed = failed
        }
    }

    /// An event passed on by a later transform is the same event: kept once.
    private func record(event p: Position, in s: inout State) {
        let duplicate = s.events.reversed().prefix(32).contains { e in
            e.deviceKey == p.deviceKey && e.event == p.event && e.time == p.time
                && e.latitude == p.latitude && e.longitude == p.longitude
        }
        guard !duplicate else { return }
        s.events.append(p)
        if s.events.count > PipelineActivity.maximumEvents { s.events.removeFirst(s.events.count - PipelineActivity.maximumEvents) }
        append(p, to: &s)
    }

    private func append(_ p: Position, to s: inout State) {
        s.sequence += 1
        let update = Update(sequence: s.sequence, position: p)
        if s.log.count < PipelineActivity.updateLogCapacity {
            s.log.append(update)
        } else {
            s.log[Int((s.sequence - 1) % UInt64(PipelineActivity.updateLogCapacity))] = update
        }
    }

    private func publish() {
        guard listenerCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        wake()
    }

    /// Calls `wake` after every batch that adds updates and on every ``wake()``, from the
    /// pipeline's thread, until ``removeUpdateListener(_:)``: it must return at once. Returns
    /// the listener's id.
    public func addUpdateListener(_ wake: @escaping @Sendable () -> Void) -> Int {
        let id = listeners.withLock { l in
            defer { l.next += 1 }
            l.wakes[l.next] = wake
            return l.next
        }
        listenerCount.add(1, ordering: .sequentiallyConsistent)
        return id
    }

    /// Stops calling the listener `id`.
    public func removeUpdateListener(_ id: Int) {
        if listeners.withLock({ $0.wakes.removeValue(forKey: id) }) != nil {
            listenerCount.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    /// Calls every listener (the API stops, or a reload changed the fences), outside the lock.
    public func wake() {
        let wakes = listeners.withLock { Array($0.wakes.values) }
        for w in wakes { w() }
    }

    /// The updates after `sequence`, oldest first; nil when some were already overwritten (the
    /// reader fell too far behind and must start again from a ``snapshot()``).
    public func updates(after sequence: UInt64) -> [Update]? {
        state.withLock { s in
            guard s.sequence > sequence else { return [] }
            let capacity = UInt64(PipelineActivity.updateLogCapacity)
            guard s.sequence - sequence <= UInt64(s.log.count) else { return nil }
            return (sequence + 1...s.sequence).map { s.log[Int(($0 - 1) % capacity)] }
        }
    }

    /// Every device's tail and the recent events.
    public func snapshot() -> Snapshot {
        state.withLock { s in
            Snapshot(sequence: s.sequence, tails: s.tails.map { ($0.key, $0.value) }.sorted { $0.device < $1.device }, events: s.events)
        }
    }

    /// Every device's newest position, sorted by device id.
    public var devices: [(device: String, latest: Latest)] {
        state.withLock { s in s.devices.map { ($0.key, $0.value) } }.sorted { $0.device < $1.device }
    }

    /// The state of `source` (a component id); a source not yet heard from has an empty state.
    public func source(_ id: String) -> SourceState {
        state.withLock { $0.sources[id] ?? SourceState() }
    }
}
