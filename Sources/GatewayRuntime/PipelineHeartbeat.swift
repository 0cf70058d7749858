import GatewayCore
import Synchronization

/// Supervises a running pipeline from outside the runtime (the systemd notifier in the CLI).
///
/// Implementation requirements:
/// - `pipelineStarted` and `heartbeat` are called from the runtime's heartbeat task: they return
///   quickly and never block (a datagram to a socket is fine).
public protocol PipelineMonitor: Sendable {
    /// How often the runtime calls ``heartbeat(_:)``.
    var heartbeatInterval: Duration { get }
    /// How long a component may hold positions without moving them before it counts as wedged.
    var stallLimit: Duration { get }
    /// Every component was built (files, queues, ports checked) and the runtime's tasks launched.
    func pipelineStarted(_ heartbeat: PipelineHeartbeat)
    /// One beat of the runtime, with what it measured; see ``PipelineHeartbeat`` for "progress".
    func heartbeat(_ heartbeat: PipelineHeartbeat)
}

/// What the runtime's heartbeat task measured at one beat.
///
/// The pipeline **makes progress** when the heartbeat task runs (on the global pool, not on the
/// pipeline's threads: the global executor is not starved) and no component is wedged. A
/// component is wedged when, for longer than the monitor's `stallLimit`:
/// - a transform stayed inside one call (`process`, `tick`, `finish`): a blocked lock or a
///   runaway loop; every source feeding it is stuck behind it;
/// - a sink left positions waiting in its buffer without taking any: a blocked write or a hung
///   run loop. A durable sink retrying an unreachable peer is *not* wedged: it keeps committing
///   what arrives to its queue, so it keeps taking from its buffer;
/// - one job held the pipeline's threads (`threads: one job running for 31s, …`): a component
///   blocking its thread with a synchronous wait, which stops every component sharing it.
/// A source that produces nothing (a receiver unplugged, a quiet broker) is not a wedge: sources
/// own their reconnection and stall timeouts.
public struct PipelineHeartbeat: Sendable {
    /// Wedged components, each as `sinks.upload: 3 position(s) waiting, none taken for 31s`.
    public var wedged: [String]
    /// Positions the sources emitted so far.
    public var positionsIn: Int
    /// Positions the sinks delivered so far (written, or acknowledged by their peer).
    public var positionsOut: Int
    /// Positions in sink buffers plus positions in sink queues (`queue.depth`).
    public var queued: Int
    /// Sources that emitted within the last ``PipelineHeartbeat/producingWindow``.
    public var sourcesProducing: Int
    public var sources: Int

    /// How recent a source's last position must be for it to count as producing.
    public static let producingWindow: Duration = .seconds(10)

    /// True when nothing is wedged.
    public var progressing: Bool { wedged.isEmpty }

    /// One line for `systemctl status`.
    public var summary: String {
        var s = "in=\(positionsIn) out=\(positionsOut) queued=\(queued) sources producing \(sourcesProducing)/\(sources)"
        if !wedged.isEmpty { s += "; wedged: " + wedged.joined(separator: ", ") }
        return s
    }
}

/// Counts entries into and exits from a guarded region, so another task can tell a call that has
/// been in progress all along from a stream of short calls, without taking the region's lock.
final class ActivityProbe: Sendable {
    private let entered = Atomic<UInt64>(0)
    private let exited = Atomic<UInt64>(0)

    func enter() { entered.add(1, ordering: .relaxed) }
    func exit() { exited.add(1, ordering: .relaxed) }

    /// The entry count, when a call is in progress; nil when idle.
    var busyMark: UInt64? {
        let x = exited.load(ordering: .acquiring)
        let e = entered.load(ordering: .acquiring)
        return e != x ? e : nil
    }
}

/// Remembers since when each component has looked stuck with the same mark.
struct StallTracker {
    private var since: [ObjectIdentifier: (mark: UInt64, first: MonotonicInstant)] = [:]

    /// Records a sample; returns for how long `id` has been stuck with `mark`, or nil when it is
    /// not stuck (`mark` nil) or the mark changed (it moved since the last sample).
    mutating func observe(_ id: ObjectIdentifier, stuckWith mark: UInt64?, now: MonotonicInstant) -> Duration? {
        guard let mark else { since[id] = nil; return nil }
        if let s = since[id], s.mark == mark { return now - s.first }
        since[id] = (mark, now)
        return .zero
    }

    /// Forgets components no longer sampled (replaced by a reload), so a new object at a
    /// reused address starts afresh.
    mutating func keepOnly(_ ids: Set<ObjectIdentifier>) {
        since = since.filter { ids.contains($0.key) }
    }
}

extension Pipeline {
    /// The heartbeat task: samples the components every `monitor.heartbeatInterval` and reports.
    func runHeartbeat(_ monitor: any PipelineMonitor) async {
        let clock = self.clock
        var tracker = StallTracker()
        var lastEmitted: [String: (count: Int, at: MonotonicInstant?)] = [:]
        var reportedWedged: [String] = []
        func sample() -> PipelineHeartbeat {
            let now = clock.monotonicNow()
            // Read afresh at every beat: a reload replaces components.
            let (sources, transforms, sinks) = heartbeatView()
            var wedged: [String] = []
            let limit = monitor.stallLimit
            for t in transforms {
                if let d = tracker.observe(ObjectIdentifier(t), stuckWith: t.activity.busyMark, now: now), d > limit {
                    wedged.append("\(t.stats.id): inside one call for \(DurationText.format(d))")
                }
            }
            if let d = tracker.observe(ObjectIdentifier(threads), stuckWith: threads.activity.busyMark, now: now), d > limit {
                wedged.append("threads: one job running for \(DurationText.format(d)), the components behind it waiting")
            }
            var queued = 0
            var out = 0
            for s in sinks {
                let mark = s.buffer.progressMark
                queued += mark.waiting + s.stats.value("queue.depth")
                out += s.stats.emitted
                if let d = tracker.observe(ObjectIdentifier(s.buffer), stuckWith: mark.waiting > 0 ? mark.taken : nil, now: now), d > limit {
                    wedged.append("\(s.stats.id): \(mark.waiting) position(s) waiting, none taken for \(DurationText.format(d))")
                }
            }
            tracker.keepOnly(Set(transforms.map { ObjectIdentifier($0) } + sinks.map { ObjectIdentifier($0.buffer) } + [ObjectIdentifier(threads)]))
            var positionsIn = 0
            var producing = 0
            for stats in sources {
                let n = stats.emitted
                positionsIn += n
                var last = lastEmitted[stats.id] ?? (count: 0, at: nil)
                if n != last.count { last = (n, now) }
                lastEmitted[stats.id] = last
                if let at = last.at, now - at <= PipelineHeartbeat.producingWindow { producing += 1 }
            }
            return PipelineHeartbeat(wedged: wedged, positionsIn: positionsIn, positionsOut: out, queued: queued,
                                     sourcesProducing: producing, sources: sources.count)
        }
        monitor.pipelineStarted(sample())
        while !Task.isCancelled {
            do { try await clock.sleep(for: monitor.heartbeatInterval) } catch { return }
            let beat = sample()
            // Logged on change only: the journal says why systemd is about to restart the service.
            let names = beat.wedged.map { String($0.prefix(while: { $0 != ":" })) }
            if names != reportedWedged {
                if beat.wedged.isEmpty {
                    logger.warning("making progress again")
                } else {
                    logger.error("no progress, watchdog keepalives withheld: \(beat.wedged.joined(separator: "; "))")
                }
                reportedWedged = names
            }
            monitor.heartbeat(beat)
        }
    }
}
