import GatewayCore
import Locking

/// A source's `reorder_window`: each device's positions are held that long after they arrive
/// and released in fix-time order, so a fix that arrives a little late (a tracker's buffered
/// record behind a live one, a redelivered broker message) takes its place before the stateful
/// transforms see it, instead of being treated as late.
///
/// Release rule: once the oldest-arrived position of a device has been held for the window, it
/// goes, and with it every held position of that device whose fix time is not after its own, in
/// time order. Positions without time go first, in arrival order.
/// Positions keep their batch's end-to-end acknowledgement: the batch is acknowledged upstream
/// only once every one of its positions was released and handled, so holding loses nothing
/// (a device waits up to the window longer for its answer).
final class ReorderWindow: Sendable {
    private struct Held {
        var position: Position
        var arrived: Int64
        var order: UInt64
        /// Its batch's acknowledgement, held until every held position of the batch is handled.
        var hold: Countdown?
    }

    private struct State {
        var devices: [String: [Held]] = [:]
        var order: UInt64 = 0
        var count = 0
    }

    let window: Duration
    private let state = Locked(State())

    init(window: Duration) { self.window = window }

    /// Positions held now.
    var held: Int { state.withLock { $0.count } }

    /// Holds a batch (`now` in milliseconds of a monotonic clock).
    func add(_ batch: [Position], acknowledgement: BatchAcknowledgement?, now: Int64) {
        guard !batch.isEmpty else { return }
        let hold = acknowledgement.map { ack -> Countdown in
            ack.retain()
            return Countdown(count: batch.count, then: ack.release)
        }
        state.withLock { s in
            for p in batch {
                s.order += 1
                s.devices[p.deviceKey, default: []].append(Held(position: p, arrived: now, order: s.order, hold: hold))
            }
            s.count += batch.count
        }
    }

    /// What is due at `now` (everything with `all`), in fix-time order per device, each with the
    /// holds to release once it is handled.
    func release(now: Int64, all: Bool = false) -> (positions: [Position], holds: [Countdown]) {
        let limit = window.milliseconds
        // Per device, in time order; devices in the order their oldest held position arrived.
        var groups: [(first: UInt64, held: ArraySlice<Held>)] = []
        state.withLock { s in
            for (device, held) in s.devices {
                guard let oldest = held.min(by: { $0.order < $1.order }), all || now - oldest.arrived >= limit else { continue }
                var sorted = held.sorted(by: ReorderWindow.fixOrder)
                if all {
                    groups.append((oldest.order, sorted[...]))
                    s.devices[device] = nil
                    continue
                }
                // Every position up to the last one that is due, in time order.
                let due = sorted.lastIndex { now - $0.arrived >= limit } ?? 0
                groups.append((oldest.order, sorted[...due]))
                sorted.removeFirst(due + 1)
                s.devices[device] = sorted.isEmpty ? nil : sorted
            }
            s.count -= groups.reduce(0) { $0 + $1.held.count }
        }
        let out = groups.sorted { $0.first < $1.first }.flatMap(\.held)
        return (out.map(\.position), out.compactMap(\.hold))
    }

    /// Fix time (none first), then arrival.
    private static func fixOrder(_ a: Held, _ b: Held) -> Bool {
        let x = a.position.time?.milliseconds ?? .min, y = b.position.time?.milliseconds ?? .min
        return x != y ? x < y : a.order < b.order
    }
}
