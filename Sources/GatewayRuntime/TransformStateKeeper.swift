import GatewayCore
import Locking
import Synchronization

/// Restores one stateful transform's per-device state at build and saves what each batch changed
/// once the batch is acknowledged end to end (``BatchAcknowledgement/beforeHandled(_:)``), so
/// the state in the store is the state after the last acknowledged position: a crash replays
/// what was not acknowledged against the state from before it, and replay gives the same outputs.
///
/// Batches without an acknowledgement (sources that cannot replay: serial, a file) have their
/// changes saved once routing returned, which for a durable sink is after its commit; nobody
/// waits for those writes, so the store gathers them for a moment (``DeviceStateStore/writeLazily``).
final class TransformStateKeeper: Sendable {
    let transform: String
    let format: String
    private let store: any DeviceStateStore
    private let stats: ComponentStats
    private let logger: Logger
    /// Paces the log lines of failed writes.
    private let clock: any GatewayClock
    /// Orders every keeper's writes, across reloads (a replaced transform's last changes and its
    /// replacement's first write to the same rows).
    private static let sequence = Atomic<UInt64>(0)
    private let failures = Locked(LogRateLimit())

    private init(transform: String, format: String, store: any DeviceStateStore, context: ComponentContext) {
        self.transform = transform
        self.format = format
        self.store = store
        self.stats = context.stats
        self.logger = context.logger
        self.clock = context.clock
    }

    /// Restores `built`'s state from `store` and starts recording its changes; nil (and `built`
    /// untouched) for a transform that keeps no state.
    static func restore(_ built: inout any PositionTransform, id: String, store: (any DeviceStateStore)?, context: ComponentContext) -> TransformStateKeeper? {
        guard var stateful = built as? any StatefulTransform, stateful.keepsState else { return nil }
        guard let store else {
            context.logger.info("per-device state is kept in memory only: a restart starts every device afresh (set settings.state.path, or give a sink a durable queue)")
            return nil
        }
        let format = stateful.stateFormat
        var restored = 0, otherFormat = 0, unreadable = 0
        do {
            for record in try store.load(transform: id) {
                guard record.format == format else { otherFormat += 1; continue }
                guard let value = record.state else { continue }
                do {
                    try stateful.restore(device: record.device, from: value)
                    restored += 1
                } catch {
                    unreadable += 1
                    if unreadable <= 3 { context.logger.warning("state of device \(record.device) not restored (it starts afresh): \(error)") }
                }
            }
        } catch {
            context.logger.error("cannot read per-device state from \(store.location) (every device starts afresh): \(error)")
        }
        var note = "restored the state of \(restored) device(s) from \(store.location)"
        if otherFormat > 0 { note += "; \(otherFormat) saved in another format start afresh" }
        if unreadable > 0 { note += "; \(unreadable) unreadable start afresh" }
        context.logger.info(note)
        stateful.recordStateChanges()
        built = stateful
        let keeper = TransformStateKeeper(transform: id, format: format, store: store, context: context)
        if store.totals(transform: id) != nil {
            context.stats.gauge("state.devices") { store.totals(transform: id)?.devices ?? 0 }
            context.stats.gauge("state.bytes") { store.totals(transform: id)?.bytes ?? 0 }
        }
        return keeper
    }

    /// Saves `changes` when `acknowledgement` is handled, before it goes upstream; at once without
    /// one. `onConflict` hears when another gateway wrote one of these devices' state (a shared
    /// store's compare-and-swap refused the write): the pipeline stops the source that fed them.
    func save(_ changes: [(device: String, state: JSONValue?)], when acknowledgement: BatchAcknowledgement?,
              onConflict: (@Sendable (DeviceStateStoreError) -> Void)? = nil) {
        let records = changes.map { DeviceStateRecord(transform: transform, device: $0.device, format: format, state: $0.state) }
        let sequence = Self.sequence.add(1, ordering: .relaxed).newValue
        guard let acknowledgement else {
            return store.writeLazily(records, sequence: sequence) { self.finished(records.count, $0, onConflict: onConflict) }
        }
        acknowledgement.beforeHandled { done in
            self.store.write(records, sequence: sequence) { error in
                self.finished(records.count, error, onConflict: onConflict)
                // Upstream hears of the batch even when its state could not be saved: the
                // positions are committed; a restart then starts those devices from older state.
                done()
            }
        }
    }

    private func finished(_ count: Int, _ error: (any Error)?, onConflict: (@Sendable (DeviceStateStoreError) -> Void)?) {
        guard let error else { return stats.count("state.writes", by: count) }
        if let conflict = error as? DeviceStateStoreError, conflict.isConflict {
            stats.count("state.conflicts", by: conflict.devices.count)
            stats.count("state.writes", by: count - conflict.devices.count)
            let suppressed = failures.withLock { $0.allow("conflict", now: clock.monotonicNow().sinceOrigin.milliseconds) }
            if let suppressed {
                let devices = conflict.devices.prefix(5).joined(separator: ", ") + (conflict.devices.count > 5 ? ", …" : "")
                logger.error("per-device state of \(devices) was written by another gateway since this one read it: not overwritten; two gateways read the same partition? (\(conflict.detail))\(LogRateLimit.suffix(suppressed))")
            }
            onConflict?(conflict)
            return
        }
        stats.count("state.errors")
        let suppressed = failures.withLock { $0.allow("write", now: clock.monotonicNow().sinceOrigin.milliseconds) }
        if let suppressed { logger.error("cannot save per-device state: \(error)\(LogRateLimit.suffix(suppressed))") }
    }
}
