import UBX

/// One UBX message the source writes to the receiver at open and after every reconnect, and how
/// long it waits for the receiver's answer.
public struct UBXCommand: Sendable, Hashable {
    /// Where it was configured (`init[1]`, `init[1] part 2` for a CFG-VALSET split at 64 items).
    public var label: String
    /// What it does, for logs: `CFG-VALSET (ram) CFG-RATE-MEAS=100, CFG-MSGOUT-UBX_NAV_PVT_USB=1`.
    public var summary: String
    /// The whole frame, sync to checksum.
    public var frame: [UInt8]
    /// How long to wait for ACK-ACK or ACK-NAK.
    public var timeout: Duration

    public init(label: String, summary: String, frame: [UInt8], timeout: Duration) {
        self.label = label
        self.summary = summary
        self.frame = frame
        self.timeout = timeout
    }

    /// The message's class and id (the frame's bytes 2 and 3).
    public var message: UBXMessageID { UBXMessageID(frame[2], frame[3]) }

    /// u-blox answers configuration messages (class CFG, 0x06) with ACK-ACK or ACK-NAK and no
    /// others: any other message is written and reported as sent.
    public var expectsAcknowledgement: Bool { message.messageClass == 0x06 }
}

/// What became of a command.
public enum UBXCommandOutcome: Sendable, Hashable {
    /// ACK-ACK, after `elapsed`.
    case acknowledged(elapsed: Duration)
    /// ACK-NAK: the receiver refused it (a key it does not know, a value out of range, a layer it lacks).
    case rejected
    /// No ACK-ACK or ACK-NAK for it within its timeout.
    case noAnswer
    /// Written; the message is not one the receiver acknowledges.
    case sent
    /// The write failed (the port went away); the commands after it are not written either.
    case notWritten

    /// A short word for logs and counters.
    public var word: String {
        switch self {
        case .acknowledged: "acknowledged"
        case .rejected: "rejected"
        case .noAnswer: "no_answer"
        case .sent: "sent"
        case .notWritten: "not_written"
        }
    }
}
