/// Where one request stands between the server's event thread, which runs the handler, and the
/// thread that answers it; the server performs the actions under the request's lock.
///
/// ```
///                        answer ──▶ (kept)                 answer / server stops
///  receiving ──▶ handling ──────────────▶ handler returned ──▶ suspended ──────▶ resuming ──▶ answered
///      │ (413)       │ (answer kept: queue it)    │ no answer      (resume the connection) (queue it)
///      └─────────────┴────────────────────────────┴──────────────────────────────────────────────▶ closed
/// ```
///
/// A connection is resumed exactly once per suspension, by whoever moves it out of `suspended`,
/// and never after the server began to stop (it resumes every suspended request itself first).
struct RequestLifecycle {
    enum Phase: Equatable {
        /// The headers and body arrive; no handler has seen the request yet.
        case receiving
        /// The handler runs on the event thread; an answer given meanwhile is kept for it.
        case handling
        /// The handler returned without an answer: the connection is suspended.
        case suspended
        /// Resumed by an answer or by the server stopping: the event thread queues what is kept.
        case resuming
        /// An answer was queued.
        case answered
        /// The connection ended (its request completed, the client left, the server stopped).
        case closed
    }

    private(set) var phase: Phase = .receiving
    /// The answer not yet queued.
    private(set) var answer: HTTPResponse?

    /// What the event thread does once the handler returned.
    enum AfterHandler {
        case queue(HTTPResponse)
        /// Nobody answered yet: suspend the connection until someone does.
        case suspend
        /// Nobody answered and the server stops: answer 503 rather than suspend.
        case refuse
    }

    /// What the answering thread does with an answer.
    enum OnAnswer {
        /// Kept for the event thread, which queues it (the handler is still running, or a resume
        /// is already on its way).
        case kept
        /// Kept, and the connection must be resumed so the event thread queues it.
        case resume
        /// Too late: answered before, or the connection is gone. A stream in it must be closed.
        case ignored
    }

    /// Whether an answer was accepted (or the server answered for lack of one).
    private(set) var hasAnswer = false

    /// The request is complete and goes to the handler.
    mutating func handlerStarts() {
        if phase == .receiving { phase = .handling }
    }

    /// The server answered before the request was complete (a body over the limit).
    mutating func answeredEarly() {
        phase = .answered
        hasAnswer = true
    }

    mutating func handlerReturned(stopping: Bool) -> AfterHandler {
        guard phase == .handling else { return .refuse }
        if let kept = answer {
            answer = nil
            phase = .answered
            return .queue(kept)
        }
        if stopping {
            phase = .answered
            hasAnswer = true
            return .refuse
        }
        phase = .suspended
        return .suspend
    }

    mutating func answered(_ response: HTTPResponse) -> OnAnswer {
        switch phase {
        case .handling:
            guard answer == nil else { return .ignored }
            answer = response
            hasAnswer = true
            return .kept
        case .suspended:
            answer = response
            hasAnswer = true
            phase = .resuming
            return .resume
        case .resuming:
            // The server resumed it to stop: an answer that comes first is still sent.
            guard answer == nil else { return .ignored }
            answer = response
            hasAnswer = true
            return .kept
        case .receiving, .answered, .closed:
            return .ignored
        }
    }

    /// The server stops: true when the connection is suspended and must be resumed now.
    mutating func serverStopping() -> Bool {
        guard phase == .suspended else { return false }
        phase = .resuming
        return true
    }

    /// The event thread was called again after a resume: the answer to queue (nil: the server
    /// stops and nobody answered; answer 503).
    mutating func resumed() -> HTTPResponse? {
        guard phase == .resuming else { return nil }
        phase = .answered
        hasAnswer = true
        defer { answer = nil }
        return answer
    }

    /// The connection ended; returns an answer never queued (its stream must be closed).
    mutating func closed() -> HTTPResponse? {
        phase = .closed
        defer { answer = nil }
        return answer
    }
}
