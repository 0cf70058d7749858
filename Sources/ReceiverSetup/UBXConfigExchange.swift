import GatewayCore
import UBX

/// The exchange of configuration messages with a receiver, one message at a time: write it, wait
/// for its ACK-ACK or ACK-NAK until its timeout, then the next.
///
/// A state machine without I/O (the caller writes, reads and keeps time): each event returns
/// what to do next. One message at a time because an ACK names only the message class and id,
/// so two CFG-VALSETs in flight could not be told apart. Acknowledgements of other messages (a
/// late answer to an earlier one, another program's) are ignored.
public struct UBXConfigExchange: Sendable {
    /// What the caller does next.
    public enum Action: Sendable, Equatable {
        /// Write this command's frame, then call ``written(at:)`` (or ``writeFailed()``).
        case write(index: Int, frame: [UInt8])
        /// Read the receiver until this instant, passing each acknowledgement to
        /// ``received(_:at:)``; call ``timePassed(now:)`` when it comes.
        case wait(until: Timestamp)
        /// Every command has an outcome.
        case finished
    }

    public let commands: [UBXCommand]
    /// One per command, nil until decided.
    public private(set) var outcomes: [UBXCommandOutcome?]
    private var index = 0
    private var writtenAt: Timestamp?
    private var deadline: Timestamp?

    public init(commands: [UBXCommand]) {
        self.commands = commands
        outcomes = Array(repeating: nil, count: commands.count)
    }

    /// The first action.
    public mutating func start() -> Action { next() }

    /// The current command was written at `now`.
    public mutating func written(at now: Timestamp) -> Action {
        guard index < commands.count, deadline == nil else { return current }
        if commands[index].expectsAcknowledgement {
            writtenAt = now
            deadline = Timestamp(milliseconds: now.milliseconds + commands[index].timeout.milliseconds)
            return current
        }
        return decide(.sent)
    }

    /// Writing failed: this command and those after it are not written.
    public mutating func writeFailed() -> Action {
        while index < commands.count {
            outcomes[index] = .notWritten
            index += 1
        }
        deadline = nil
        return .finished
    }

    /// An acknowledgement arrived at `now`.
    public mutating func received(_ ack: UBXAcknowledgement, at now: Timestamp) -> Action {
        guard index < commands.count, let start = writtenAt, deadline != nil, ack.message == commands[index].message else { return current }
        return decide(ack.accepted ? .acknowledged(elapsed: .milliseconds(now.milliseconds - start.milliseconds)) : .rejected)
    }

    /// Time moved to `now`: a command whose deadline passed has no answer.
    public mutating func timePassed(now: Timestamp) -> Action {
        guard let d = deadline, now >= d else { return current }
        return decide(.noAnswer)
    }

    /// The action the exchange is waiting on.
    public var current: Action {
        guard index < commands.count else { return .finished }
        if let deadline { return .wait(until: deadline) }
        return .write(index: index, frame: commands[index].frame)
    }

    private mutating func decide(_ outcome: UBXCommandOutcome) -> Action {
        outcomes[index] = outcome
        index += 1
        deadline = nil
        writtenAt = nil
        return next()
    }

    private func next() -> Action { current }
}
