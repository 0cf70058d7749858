/// Where one streamed response stands between the event thread, which asks its body for bytes,
/// and the threads that wake it; the server performs the actions under the stream's lock.
///
/// ```
///            body says "later"              wake / client left / server stops
///  running ─────────────────────▶ suspended ─────────────────────────────────▶ running
///     │  (a wake came while the body was asked: ask again instead)
///     └──────────────────────────────────────────────────────────────────────▶ finished
/// ```
///
/// A wake that arrives while the body is being asked is remembered, so data that becomes ready
/// between the body's answer and the suspension is never left waiting.
struct StreamLifecycle {
    enum Phase: Equatable {
        /// The event thread may ask the body at any moment.
        case running
        /// The connection is suspended until a wake.
        case suspended
        /// The response is over; wakes do nothing.
        case finished
    }

    private(set) var phase: Phase = .running
    /// A wake arrived since the body was last asked.
    private(set) var wakePending = false
    /// The client hung up: the stream ends at the next ask.
    private(set) var clientGone = false

    /// What the event thread does after the body answered `later`.
    enum OnLater: Equatable {
        /// Something woke the body meanwhile: ask it again.
        case askAgain
        /// Suspend the connection (and return no bytes).
        case suspend
        /// End the response normally: the server stops.
        case end
        /// Abort the response: the client left (or the stream is already over).
        case abort
    }

    /// The event thread is about to ask the body.
    mutating func asking() {
        wakePending = false
    }

    mutating func bodySaidLater(stopping: Bool) -> OnLater {
        if phase == .finished || clientGone { return .abort }
        if stopping { return .end }
        if wakePending { return .askAgain }
        phase = .suspended
        return .suspend
    }

    /// Someone has something for the body: true when the connection must be resumed now.
    mutating func wake() -> Bool {
        switch phase {
        case .suspended:
            phase = .running
            return true
        case .running:
            wakePending = true
            return false
        case .finished:
            return false
        }
    }

    /// The client hung up: true when the connection must be resumed so it can end.
    mutating func clientLeft() -> Bool {
        clientGone = true
        return wake()
    }

    mutating func finish() {
        phase = .finished
    }
}
