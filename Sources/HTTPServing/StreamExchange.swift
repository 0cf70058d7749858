import Dispatch
import Locking

/// A streamed body, the bytes of its last chunk not yet handed over, and its wakes.
final class StreamExchange: @unchecked Sendable {
    // Unchecked Sendable: `pending` and `offset` are used only on the event thread (libmicrohttpd
    // calls the content reader one call at a time); `connection` there, or under `state` while
    // the lifecycle says the connection is suspended.
    let body: any HTTPStreamBody
    let connection: OpaquePointer
    let core: Core
    let record: ConnectionRecord?
    private let state = Locked(Guarded())
    private var pending: [UInt8] = []

    /// The lifecycle, and the group ``HTTPServer/stop()`` waits on until this stream is over.
    private struct Guarded {
        var lifecycle = StreamLifecycle()
        var drain: DispatchGroup?
    }
    private var offset = 0

    init(body: any HTTPStreamBody, connection: OpaquePointer, core: Core, record: ConnectionRecord?) {
        self.body = body
        self.connection = connection
        self.core = core
        self.record = record
    }

    /// Up to `max` bytes into `buffer`; 0 after suspending the connection, never otherwise.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> Int {
        while offset >= pending.count {
            let gone = state.withLock { s -> Bool in
                s.lifecycle.asking()
                return s.lifecycle.clientGone
            }
            if gone { return HTTPServer.endWithError }
            switch body.next() {
            case .bytes(let bytes) where !bytes.isEmpty:
                pending = bytes
                offset = 0
            case .end:
                return HTTPServer.endOfStream
            case .bytes, .later:
                let step = state.withLock { s -> StreamLifecycle.OnLater in
                    let step = s.lifecycle.bodySaidLater(stopping: core.isStopping)
                    if step == .suspend {
                        HTTPServer.suspend(connection)
                        core.stats.suspended.add(1, ordering: .relaxed)
                    }
                    return step
                }
                switch step {
                case .askAgain: continue
                case .suspend: return 0
                case .end: return HTTPServer.endOfStream
                case .abort: return HTTPServer.endWithError
                }
            }
        }
        let count = min(max, pending.count - offset)
        pending.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            buffer.copyMemory(from: base + offset, byteCount: count)
        }
        offset += count
        return count
    }

    /// The response is destroyed: wakes do nothing from now on.
    func finished() {
        state.withLock { s in
            s.lifecycle.finish()
            s.drain?.leave()
            s.drain = nil
        }
        core.detach(self)
        body.closed()
    }

    // Any thread.

    func wake() {
        state.withLock { s in
            if s.lifecycle.wake() { resumed() }
        }
    }

    func clientLeft() {
        state.withLock { s in
            if s.lifecycle.clientLeft() { resumed() }
        }
    }

    /// The stream ends at its next ask, which a suspended one gets now; `drain` waits until it is over.
    func serverStopping(drain: DispatchGroup) {
        state.withLock { s in
            guard s.lifecycle.phase != .finished else { return }
            drain.enter()
            s.drain = drain
            if s.lifecycle.wake() { resumed() }
        }
    }

    /// Under `state`, after the lifecycle said to resume.
    private func resumed() {
        core.stats.suspended.subtract(1, ordering: .relaxed)
        HTTPServer.resume(connection)
    }
}
