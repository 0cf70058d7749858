import GatewayCore
import Locking

// The running components, as the supervisor holds them and the routes reach them.
extension Pipeline {
    /// A transform on the routes: its lock makes calls one at a time, whichever source's task
    /// routes the batch, and it counts, observes and collects state changes around each call.
    final class TransformNode: Sendable {
        let id: String
        let stats: ComponentStats
        let tickInterval: Duration?
        /// Calls in progress, for the heartbeat's wedge detection (PipelineHeartbeat.swift).
        let activity = ActivityProbe()
        private let transform: Locked<any PositionTransform>
        private let observer: (any PipelineObserver)?
        /// Saves the per-device state of a stateful transform (TransformStateKeeper.swift).
        let keeper: TransformStateKeeper?

        init(id: String, transform: sending any PositionTransform, stats: ComponentStats, observer: (any PipelineObserver)? = nil,
             keeper: TransformStateKeeper? = nil) {
            self.id = id
            self.stats = stats
            self.observer = observer
            self.keeper = keeper
            self.tickInterval = transform.tickInterval
            self.transform = Locked(transform)
        }

        /// The batch through the transform, and the state it changed (saved by the caller, which
        /// knows the batch's acknowledgement).
        func process(_ batch: consuming [Position]) -> (positions: [Position], changes: [(device: String, state: JSONValue?)]) {
            var out = batch
            var changes: [(device: String, state: JSONValue?)] = []
            stats.addReceived(out.count)
            activity.enter(); defer { activity.exit() }
            transform.withLock { t in
                t.process(batch: &out)
                if keeper != nil { changes = t.takeStateChanges() }
            }
            stats.addEmitted(out.count)
            observe(out)
            return (out, changes)
        }

        func tick(now: Timestamp) -> [Position] {
            var out: [Position] = []
            activity.enter(); defer { activity.exit() }
            let changes = transform.withLock { t in
                t.tick(now: now, into: &out)
                return keeper != nil ? t.takeStateChanges() : []
            }
            if !changes.isEmpty { keeper?.save(changes, when: nil) }
            stats.addEmitted(out.count)
            observe(out)
            return out
        }

        func finish() -> [Position] {
            var out: [Position] = []
            activity.enter(); defer { activity.exit() }
            let changes = transform.withLock { t in
                t.finish(into: &out)
                return keeper != nil ? t.takeStateChanges() : []
            }
            if !changes.isEmpty { keeper?.save(changes, when: nil) }
            stats.addEmitted(out.count)
            observe(out)
            return out
        }

        private func observe(_ out: [Position]) {
            if let observer, !out.isEmpty { observer.transformEmitted(id, out) }
        }
    }

    /// A running source and what stops it.
    final class SourceHandle: Sendable {
        let component: PipelineConfiguration.Component
        let source: any PositionSource
        let stats: ComponentStats
        let logger: Logger
        let stop = ShutdownTrigger()
        let ended = ShutdownTrigger()

        init(component: PipelineConfiguration.Component, source: any PositionSource, stats: ComponentStats, logger: Logger) {
            self.component = component
            self.source = source
            self.stats = stats
            self.logger = logger
        }
    }

    /// A sink's buffer and the controls of its task (the sink itself is handed to the task).
    final class SinkHandle: Sendable {
        let component: PipelineConfiguration.Component
        let buffer: SinkBuffer
        let stats: ComponentStats
        let logger: Logger
        /// Fired when the drain deadline passed: the sink's task is cancelled.
        let cancel = ShutdownTrigger()
        let ended = ShutdownTrigger()

        init(component: PipelineConfiguration.Component, context: ComponentContext) {
            self.component = component
            self.buffer = SinkBuffer(capacity: component.buffer.maxPositions, policy: component.buffer.whenFull,
                                     durable: component.prepared.durable, stats: context.stats, clock: context.clock)
            self.stats = context.stats
            self.logger = context.logger
        }
    }

    /// The components of the current configuration, ended ones included (their stats stay
    /// readable); changed only by the supervisor.
    struct Topology: Sendable {
        var configuration: PipelineConfiguration
        var sources: [String: SourceHandle] = [:]
        var transforms: [String: TransformNode] = [:]
        var sinks: [String: SinkHandle] = [:]
    }
}
