/// An HTTP response: a status, headers and a whole body, or a body streamed until it ends.
public struct HTTPResponse: Sendable {
    /// The status code, 100–999.
    public var status: Int
    /// Header lines in order; libmicrohttpd adds `Content-Length` or chunking, `Date` and `Connection`.
    public var headers: [(String, String)]
    /// The whole body (ignored when ``stream`` is set).
    public var body: [UInt8]
    /// When set, the body is sent as it comes (chunked) instead of ``body``.
    public var stream: (any HTTPStreamBody)?
    /// The idle timeout of a streamed response's connection (the stream must send something more
    /// often); nil: the server's ``HTTPServer/Limits/idleTimeout``.
    public var streamIdleTimeout: Duration?

    /// A response with a whole body.
    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = nil
        self.streamIdleTimeout = nil
    }

    /// A response whose body `stream` makes while it is sent; its connection is closed after
    /// `idleTimeout` without a byte going out.
    public init(status: Int, headers: [(String, String)] = [], stream: any HTTPStreamBody, idleTimeout: Duration) {
        self.status = status
        self.headers = headers
        self.body = []
        self.stream = stream
        self.streamIdleTimeout = idleTimeout
    }
}

/// What a streamed body has for the connection when asked.
public enum HTTPStreamChunk: Sendable, Equatable {
    /// Bytes to send now (an empty array counts as ``later``).
    case bytes([UInt8])
    /// Nothing now: the server suspends the connection until the body's waker is called.
    case later
    /// The body is complete: the response ends.
    case end
}

/// Resumes a streamed response's suspended connection: the server gives one to each body.
///
/// Calling it from any thread, at any time, as often as wanted is safe: a connection that is not
/// suspended asks its body once more before it would suspend, and one that is gone ignores it.
public struct HTTPStreamWaker: Sendable {
    private let action: @Sendable () -> Void

    /// A waker that runs `action` (the server's resumes a connection; tests may count calls).
    public init(_ action: @escaping @Sendable () -> Void) { self.action = action }

    /// Tells the server the body has something (or has ended): it will be asked again soon.
    public func wake() { action() }
}

/// A response body made while it is sent (Server-Sent Events), without holding a thread.
///
/// The server asks ``next()`` whenever the connection can take more. A body with nothing to send
/// answers ``HTTPStreamChunk/later`` and the connection is suspended: it costs no thread and no
/// polling until the body calls the ``HTTPStreamWaker`` it was given in ``start(waker:)``.
///
/// Implementation requirements:
/// - ``start(waker:)``, ``next()`` and ``closed()`` are called on the server's event thread, one
///   at a time, so they must return at once: never wait in them. The waker may be called from
///   any thread, including from inside ``next()``.
/// - ``closed()`` is called exactly once for every body handed to the server in a response, also
///   when it was never started (the answer was ignored, or the client left first); release
///   timers and subscriptions there, since the waker does nothing afterwards.
/// - A body that answers ``HTTPStreamChunk/later`` must eventually call the waker (a timer for
///   keep-alive comments, a subscription for data) or its client waits until it leaves; a client
///   that hangs up is noticed by the server within a second even while suspended.
public protocol HTTPStreamBody: AnyObject, Sendable {
    /// Called once, before the first ``next()``, with what resumes this body's connection.
    func start(waker: HTTPStreamWaker)
    /// The next bytes, ``HTTPStreamChunk/later`` when there are none now, or the end; never blocks.
    func next() -> HTTPStreamChunk
    /// The response is over (ended, the client left, or the server stops): release what it held.
    func closed()
}

// MARK: - Default implementations

extension HTTPStreamBody {
    /// A body that never answers ``HTTPStreamChunk/later`` needs no waker.
    public func start(waker: HTTPStreamWaker) {}
    /// A body that holds nothing has nothing to release.
    public func closed() {}
}
