/// Answers one request: at once, inside the handler, or later from any thread.
///
/// A request the handler did not answer before returning waits with its connection suspended:
/// it holds no thread, does not time out and keeps its place in the connection limits until
/// ``respond(_:)`` is called. The first answer wins and later ones are ignored (a streamed body in
/// an ignored answer is closed). A responder released without an answer answers `500`, so no
/// connection is left waiting forever; an answer that comes after the client left, or after the
/// server stopped, is dropped without harm. libmicrohttpd does not watch a suspended connection,
/// so a client that leaves while its request waits is noticed only when the answer is sent: its
/// connection keeps its place in the limits until then (a client that merely half-closes its
/// side after sending must still get its answer, so it is not probed for).
public final class HTTPResponder: Sendable {
    private let exchange: RequestExchange

    init(_ exchange: RequestExchange) { self.exchange = exchange }

    /// Sends `response`, or does nothing when this request was answered already.
    public func respond(_ response: HTTPResponse) {
        exchange.answer(response)
    }

    /// Whether an answer was given (by this responder, or by the server when it stopped).
    public var hasResponded: Bool { exchange.hasAnswer }

    deinit {
        exchange.responderReleased()
    }
}
