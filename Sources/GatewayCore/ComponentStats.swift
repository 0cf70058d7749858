import Locking
import Synchronization

/// Counters of one component, read by the periodic stats line and by tests.
///
/// `received`/`emitted`/`dropped` are kept by the runtime; components add named counters
/// (`rejected.hdop`, `nmea.bad_checksum`) and gauges (`queue.depth`) of their own.
public final class ComponentStats: Sendable {
    /// Whether a named value only grows (a counter) or goes up and down (a gauge): metrics
    /// exporters type and name them differently (`_total` for counters).
    public enum Kind: Sendable {
        case counter
        case gauge
    }

    public let id: String
    private let receivedCount = Atomic<Int>(0)
    private let emittedCount = Atomic<Int>(0)
    private let droppedCount = Atomic<Int>(0)
    private let named = Locked<[(name: String, value: Int, kind: Kind)]>([])
    private let gauges = Locked<[(name: String, read: @Sendable () -> Int)]>([])

    public init(id: String) { self.id = id }

    public func addReceived(_ n: Int) { receivedCount.add(n, ordering: .relaxed) }
    public func addEmitted(_ n: Int) { emittedCount.add(n, ordering: .relaxed) }
    public func addDropped(_ n: Int) { droppedCount.add(n, ordering: .relaxed) }

    public var received: Int { receivedCount.load(ordering: .relaxed) }
    public var emitted: Int { emittedCount.load(ordering: .relaxed) }
    public var dropped: Int { droppedCount.load(ordering: .relaxed) }

    /// Adds to a named counter, creating it at zero.
    public func count(_ name: String, by n: Int = 1) {
        named.withLock { list in
            if let i = list.firstIndex(where: { $0.name == name }) { list[i].value += n } else { list.append((name, n, .counter)) }
        }
    }

    /// Sets a named gauge, or with `kind: .counter` a counter kept elsewhere (a decoder's statistics).
    public func set(_ name: String, _ value: Int, kind: Kind = .gauge) {
        named.withLock { list in
            if let i = list.firstIndex(where: { $0.name == name }) { list[i].value = value } else { list.append((name, value, kind)) }
        }
    }

    /// Registers a gauge read when the stats are read (a queue's depth and age), so it is
    /// current in every stats line, not as of the last time the component thought to set it.
    /// `read` must be quick and must not read these stats.
    public func gauge(_ name: String, read: @escaping @Sendable () -> Int) {
        gauges.withLock { list in
            if let i = list.firstIndex(where: { $0.name == name }) { list[i].read = read } else { list.append((name, read)) }
        }
    }

    /// The value of a named counter or gauge, 0 if never set.
    public func value(_ name: String) -> Int {
        if let read = gauges.withLock({ $0.first(where: { $0.name == name })?.read }) { return read() }
        return named.withLock { list in list.first(where: { $0.name == name })?.value ?? 0 }
    }

    /// Named counters and gauges: registered gauges first, then the others in the order they
    /// first appeared.
    public var namedValues: [(name: String, value: Int)] { namedValuesWithKind.map { ($0.name, $0.value) } }

    /// Named counters and gauges with their kind: registered gauges first, then the others in
    /// the order they first appeared.
    public var namedValuesWithKind: [(name: String, value: Int, kind: Kind)] {
        let live = gauges.withLock { $0 }
        return live.map { ($0.name, $0.read(), Kind.gauge) } + named.withLock { $0 }.filter { v in !live.contains { $0.name == v.name } }
    }
}
