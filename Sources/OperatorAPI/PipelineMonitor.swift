import GatewayCore
import GatewayRuntime
import Synchronization

/// What the operator API knows beyond the components' counters: the newest position of every
/// device and when each source last produced, seen through the pipeline's observer hook.
public final class PipelineMonitor: PipelineObserver {
    /// Devices remembered at most; beyond it the one heard from longest ago is forgotten, so a
    /// source that invents device ids (a UDP port scanned by many senders) cannot grow memory.
    public static let maximumDevices = 10_000

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

    private struct State {
        var devices: [String: Latest] = [:]
        var sources: [String: SourceState] = [:]
    }

    public let clock: any GatewayClock
    /// When monitoring began (a source that never produced is stalled from here).
    public let startedAt: Timestamp
    private let state = Mutex(State())

    public init(clock: any GatewayClock = SystemClock()) {
        self.clock = clock
        self.startedAt = clock.now()
    }

    public func sourceEmitted(_ source: String, _ batch: [Position]) {
        guard !batch.isEmpty else { return }
        let now = clock.now()
        state.withLock { s in
            s.sources[source, default: SourceState()].lastEmitted = now
            for p in batch {
                let key = p.deviceKey
                if s.devices[key] == nil && s.devices.count >= PipelineMonitor.maximumDevices,
                   let stalest = s.devices.min(by: { $0.value.receivedAt < $1.value.receivedAt })?.key {
                    s.devices[stalest] = nil
                }
                s.devices[key] = Latest(position: p, receivedAt: now)
            }
        }
    }

    public func sourceEnded(_ source: String, failed: Bool) {
        state.withLock { s in
            s.sources[source, default: SourceState()].ended = true
            s.sources[source, default: SourceState()].failed = failed
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
