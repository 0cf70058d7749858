import Dispatch
import Locking

/// A request between its headers and its end, and the answer that may come from any thread.
final class RequestExchange: @unchecked Sendable {
    // Unchecked Sendable: `request` is used only on the event thread (libmicrohttpd calls the
    // access handler for a connection one call at a time); `connection` is used on the event
    // thread, or under `state` while the lifecycle says the connection is suspended.
    let connection: OpaquePointer
    let core: Core
    let record: ConnectionRecord?
    private var request: HTTPRequest
    private let state = Locked(Guarded())

    /// The lifecycle, and the group ``HTTPServer/stop()`` waits on once it resumed this request.
    private struct Guarded {
        var lifecycle = RequestLifecycle()
        var drain: DispatchGroup?
    }

    init(connection: OpaquePointer, core: Core, record: ConnectionRecord?, request: HTTPRequest) {
        self.connection = connection
        self.core = core
        self.record = record
        self.request = request
    }

    // Event thread.

    /// A `Content-Length` over the limit is answered 413 before any of the body is read.
    func headersReceived() -> Bool {
        let limit = core.limits.maximumBodySize
        guard let declared = request.headers["content-length"].flatMap({ UInt64($0) }), declared > UInt64(limit) else { return true }
        core.stats.tooLarge.add(1, ordering: .relaxed)
        state.withLock { $0.lifecycle.answeredEarly() }
        core.received(record)
        let reply = HTTPResponse(status: 413, headers: [("Content-Type", "text/plain; charset=utf-8")],
                                 body: Array("request body too large: at most \(limit) bytes\n".utf8))
        return HTTPServer.queue(reply, on: connection, core: core, record: record)
    }

    /// A piece of the body; false (close the connection) once the body passes the limit, which
    /// only a chunked body can do (a declared length over it was answered at the headers).
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard request.body.count + bytes.count <= core.limits.maximumBodySize else {
            core.stats.tooLarge.add(1, ordering: .relaxed)
            return false
        }
        request.body.append(contentsOf: bytes)
        return true
    }

    /// The request is complete (or resumed): run the handler, or queue the answer it waited for.
    func requestComplete() -> Bool {
        switch state.withLock({ $0.lifecycle.phase }) {
        case .receiving:
            core.received(record)
            state.withLock { $0.lifecycle.handlerStarts() }
            runHandler()
            let step = state.withLock { s -> RequestLifecycle.AfterHandler in
                let step = s.lifecycle.handlerReturned(stopping: core.isStopping)
                if case .suspend = step {
                    HTTPServer.suspend(connection)
                    core.stats.suspended.add(1, ordering: .relaxed)
                }
                return step
            }
            switch step {
            case .queue(let reply): return HTTPServer.queue(reply, on: connection, core: core, record: record)
            case .suspend: return true
            case .refuse: return HTTPServer.queue(RequestExchange.stopping, on: connection, core: core, record: record)
            }
        case .resuming:
            let reply = state.withLock { $0.lifecycle.resumed() } ?? RequestExchange.stopping
            return HTTPServer.queue(reply, on: connection, core: core, record: record)
        case .handling, .suspended, .answered, .closed:
            // Called again with nothing to queue: closing beats being called in a loop.
            return false
        }
    }

    /// In a function of its own so the responder is released when it returns, before the
    /// caller looks for an answer: a handler that dropped it has answered 500 by then.
    @inline(never)
    private func runHandler() {
        core.handler(request, HTTPResponder(self))
    }

    /// The request is over.
    func closed() {
        let unsent = state.withLock { s in
            defer {
                s.drain?.leave()
                s.drain = nil
            }
            return s.lifecycle.closed()
        }
        unsent?.stream?.closed()
    }

    // Any thread.

    func answer(_ response: HTTPResponse) {
        deliver(response, dropped: false)
    }

    var hasAnswer: Bool { state.withLock { $0.lifecycle.hasAnswer } }

    func responderReleased() {
        guard !hasAnswer else { return }
        deliver(HTTPResponse(status: 500, headers: [("Content-Type", "text/plain; charset=utf-8")],
                             body: Array("the request was not answered\n".utf8)), dropped: true)
    }

    private func deliver(_ response: HTTPResponse, dropped: Bool) {
        let outcome = state.withLock { s -> RequestLifecycle.OnAnswer in
            let outcome = s.lifecycle.answered(response)
            // Counted before the answer can reach the client, so a client that has it sees the count.
            if outcome != .ignored && dropped { core.stats.respondersDropped.add(1, ordering: .relaxed) }
            if outcome == .resume {
                core.stats.suspended.subtract(1, ordering: .relaxed)
                HTTPServer.resume(connection)
            }
            return outcome
        }
        if outcome == .ignored { response.stream?.closed() }
    }

    /// A suspended request is resumed (to be answered 503 unless an answer is kept), and `drain`
    /// waits until its connection is done.
    func serverStopping(drain: DispatchGroup) {
        state.withLock { s in
            guard s.lifecycle.serverStopping() else { return }
            core.stats.suspended.subtract(1, ordering: .relaxed)
            HTTPServer.resume(connection)
            drain.enter()
            s.drain = drain
        }
    }

    static let stopping = HTTPResponse(status: 503, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")],
                                       body: Array("the server is stopping\n".utf8))
}
