import Dispatch
import GatewayCore
import Locking
import MQTTClient

/// Hands messages from libmosquitto's network thread to the source's task, and holds the network
/// thread until the pipeline has handled enough of them.
///
/// libmosquitto queues a QoS 1 message's PUBACK before it calls the message handler, and writes
/// it once the handler returns. So the handler (``deliver(_:)``) returns only when its message
/// has been emitted and the ``UnacknowledgedWindow`` has room again: with `max_unacked` 1 that is
/// when the message itself is handled, so no PUBACK leaves before its position is in the sinks'
/// hands; with N, at most N − 1 acknowledged messages are still in the pipeline. Holding the
/// network thread is also the backpressure: the broker sends no more while it waits.
///
///     network thread: deliver(m) ──▶ [one slot] ──▶ source task: next() → decode → acquire → emit
///            ▲ waits until taken ≥ m and the window has room        │
///            └──────── taken(m) / whenHandled → release ────────────┘
final class MQTTMessageGate: Sendable {
    private struct State {
        var pending: (sequence: UInt64, message: MQTTMessage)?
        var consumer: CheckedContinuation<(UInt64, MQTTMessage)?, Never>?
        var delivered: UInt64 = 0
        /// Sequence number of the last message the source finished with (emitted or skipped).
        var taken: UInt64 = 0
        var closed = false
    }

    private let state = Locked(State())
    private let wake = DispatchSemaphore(value: 0)
    let window: UnacknowledgedWindow

    init(window: UnacknowledgedWindow) {
        self.window = window
    }

    /// Network thread: hands `message` over and waits; false when the source closed before the
    /// message was handled (its PUBACK must then not be written).
    func deliver(_ message: MQTTMessage) -> Bool {
        let (sequence, consumer, closed) = state.withLock { s -> (UInt64, CheckedContinuation<(UInt64, MQTTMessage)?, Never>?, Bool) in
            s.delivered += 1
            if s.closed { return (s.delivered, nil, true) }
            if let c = s.consumer {
                s.consumer = nil
                return (s.delivered, c, false)
            }
            s.pending = (s.delivered, message)
            return (s.delivered, nil, false)
        }
        if closed { return false }
        consumer?.resume(returning: (sequence, message))
        while true {
            let (taken, isClosed) = state.withLock { ($0.taken, $0.closed) }
            if taken >= sequence && window.room > 0 { return true }
            if isClosed { return false }
            // Woken by taken/handled/close; the timeout only bounds a missed wakeup.
            _ = wake.wait(timeout: .now() + .milliseconds(500))
        }
    }

    /// Source task: the next message with its sequence number, nil once closed or cancelled.
    func next() async -> (UInt64, MQTTMessage)? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<(UInt64, MQTTMessage)?, Never>) in
                enum Now { case message((UInt64, MQTTMessage)), end, wait }
                let now = state.withLock { s -> Now in
                    if let p = s.pending { s.pending = nil; return .message(p) }
                    if s.closed || Task.isCancelled { return .end }
                    s.consumer = c
                    return .wait
                }
                switch now {
                case .message(let m): c.resume(returning: m)
                case .end: c.resume(returning: nil)
                case .wait: break
                }
            }
        } onCancel: {
            close()
        }
    }

    /// Source task: done with message `sequence` (emitted, or skipped as bad input).
    func taken(_ sequence: UInt64) {
        state.withLock { $0.taken = max($0.taken, sequence) }
        wake.signal()
    }

    /// Any thread: a position was handled (the window released it).
    func handled() {
        wake.signal()
    }

    /// Ends ``next()`` and releases a waiting network thread (which then drops the connection).
    func close() {
        let consumer = state.withLock { s -> CheckedContinuation<(UInt64, MQTTMessage)?, Never>? in
            s.closed = true
            defer { s.consumer = nil }
            return s.consumer
        }
        consumer?.resume(returning: nil)
        wake.signal()
    }
}
