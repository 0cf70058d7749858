import Foundation
import HTTPServing
import Locking

/// Runs `body` with a server on a free loopback port, then stops it.
func withServer(limits: HTTPServer.Limits = HTTPServer.Limits(), threads: Int = 1, _ handler: @escaping HTTPServer.Handler,
                _ body: (HTTPServer) async throws -> Void) async throws {
    let server = try HTTPServer(host: "127.0.0.1", port: 0, limits: limits, threads: threads, handler: handler)
    defer { server.stop() }
    try await body(server)
}

/// A GET request line and headers; the connection closes after the answer unless `keepAlive`.
func get(_ path: String, keepAlive: Bool = false) -> String {
    "GET \(path) HTTP/1.1\r\nHost: test\r\n\(keepAlive ? "" : "Connection: close\r\n")\r\n"
}

/// A 200 whose body is `text`.
func ok(_ text: String) -> HTTPResponse {
    HTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: Array(text.utf8))
}

/// One request on a new connection and its answer (nil when none came within 10 s).
func exchange(_ port: Int, _ request: String) throws -> RawResponse? {
    let c = try RawConnection(port: port)
    c.send(request)
    return c.response()
}

/// Responders a handler kept, to answer later from the test.
final class KeptResponders: Sendable {
    private let kept = Locked<[(path: String, responder: HTTPResponder)]>([])

    func keep(_ request: HTTPRequest, _ responder: HTTPResponder) { kept.withLock { $0.append((request.path, responder)) } }
    var count: Int { kept.withLock { $0.count } }
    /// Takes them all (the test now holds the only references).
    func take() -> [(path: String, responder: HTTPResponder)] { kept.withLock { k in defer { k = [] }; return k } }
}

/// A streamed body the test feeds: it answers what was pushed, then `later` until more comes.
final class ScriptedStream: HTTPStreamBody, Sendable {
    private struct State {
        var queue: [HTTPStreamChunk]
        var waker: HTTPStreamWaker?
        var asked = 0
        var closed = 0
        var startedOn: Int32 = 0
    }
    private let state: Locked<State>

    init(_ first: [HTTPStreamChunk] = []) { state = Locked(State(queue: first)) }

    func start(waker: HTTPStreamWaker) {
        state.withLock { s in
            s.waker = waker
            s.startedOn = currentThreadID()
        }
    }

    func next() -> HTTPStreamChunk {
        state.withLock { s in
            s.asked += 1
            return s.queue.isEmpty ? .later : s.queue.removeFirst()
        }
    }

    func closed() { state.withLock { $0.closed += 1 } }

    /// Adds `chunk` and wakes the connection.
    func push(_ chunk: HTTPStreamChunk) {
        let waker = state.withLock { s in
            s.queue.append(chunk)
            return s.waker
        }
        waker?.wake()
    }

    var asked: Int { state.withLock { $0.asked } }
    var closedCount: Int { state.withLock { $0.closed } }
    /// The kernel id of the thread that started it: the server's event thread.
    var eventThread: Int32 { state.withLock { $0.startedOn } }
}

extension HTTPStreamChunk {
    static func text(_ s: String) -> HTTPStreamChunk { .bytes(Array(s.utf8)) }
}
