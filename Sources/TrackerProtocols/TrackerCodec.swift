import GatewayCore

/// Splits a tracker's byte stream into frames and decodes each one: the protocol half of a
/// listening source, which never touches a socket.
///
///     bytes from the connection ──▶ decode(_:now:) ──▶ .message  ──▶ positions, answers
///                                         │          └─ .needMore (wait for more bytes)
///                                         └──────────▶ .invalid  (counted, skipped, never answered)
///
/// Implementation requirements:
/// - `decode` looks only at the start of `bytes` (what the connection has buffered and not yet
///   consumed) and returns one result; the caller drops `consumed` bytes and calls it again until
///   it answers `.needMore`. Feeding a stream one byte at a time, in random chunks or whole gives
///   the same messages.
/// - A frame whose checksum, length field, stop bytes or syntax is wrong is `.invalid` with the
///   bytes to skip, never a message and never answered: a device resends what it was not
///   answered for. A length field above ``TrackerLimits/maxFrameBytes`` is `.invalid` before any
///   byte of the frame is awaited or allocated.
/// - Positions carry what the frame says (time in UTC, WGS84 degrees, metres, m/s, degrees,
///   satellites, DOPs, `attributes`); the listening source sets `source`, `device` and `id`.
/// - Answers are the exact bytes the device expects. Whether an answer goes at once (login,
///   heartbeat) or only after the positions are committed is said by the message's case.
/// - Never traps on any input: lengths are checked before every read.
public protocol TrackerCodec: Sendable {
    /// Decodes the frame at the start of `bytes`. `now` is the server's clock (for answers that
    /// carry the time, such as GT06's time reply or H02's `V4`).
    mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult

    /// Decodes the frame at the start of `bytes` when nothing follows them (a datagram): what
    /// ``decode(_:now:)`` waits for the next bytes to decide (how much of a bad frame to skip)
    /// is decided now, and `.needMore` means the frame is cut short. The default is `decode`.
    mutating func decodeLast(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult

    /// Tells the codec how much of its room for messages that come in pieces (JT/T 808's split
    /// messages) each device's pieces may take: called by the listener once, before the first
    /// frame, since only the listener knows who is on the connection. `room` is called on the
    /// decoding thread. The default ignores it (a codec that keeps no pieces); a codec never
    /// told gives every device all of its room.
    mutating func limitPieces(by room: @escaping @Sendable (_ deviceID: String) -> TrackerPieceRoom)

    /// Positions the codec still holds (an NMEA epoch waiting for more sentences): called once
    /// the connection has been quiet for a second, and when it ends. Tracker frames hold
    /// nothing: the default returns none.
    mutating func flush(now: Timestamp) -> [Position]

    /// The bytes to write for an answer this codec returned, called as it goes out, in the order
    /// answers leave: a protocol that numbers the server's messages (JT/T 808's flow number)
    /// numbers them here, so answers written after a commit and at once share one sequence.
    /// The default writes the answer as it is.
    mutating func outgoing(_ answer: [UInt8]) -> [UInt8]

    /// The answer to an ``TrackerMessage/admission(_:)`` once the source decided it; nil for none.
    /// The default answers nothing (a codec that never returns an admission).
    func answer(_ admission: TrackerAdmission, _ verdict: TrackerAdmissionVerdict) -> [UInt8]?

    /// Called when the connection has been quiet for a second after input (`ending` false) and
    /// when it ends (`ending` true): what the codec has to write or count without a frame to
    /// answer, such as a request for the missing packets of a split message. The default has nothing.
    mutating func idle(now: Timestamp, ending: Bool) -> TrackerIdleOutput

    /// The command types this protocol carries to a device; the default none.
    var commandTypes: Set<CommandType> { get }

    /// The bytes of `command` for this connection (they pass ``outgoing(_:)`` as they are
    /// written); nil when the protocol cannot carry it. `now` is the server's clock.
    mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]?

    /// What `reply` says of the command that went out as `sent` (the bytes ``outgoing(_:)``
    /// gave it); nil when it answers something else.
    func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome?

    /// Whether the device answers `command` (``outcome(of:sent:)`` then says how it went); a
    /// command the protocol has no answer for is `delivered` once its bytes are written. The
    /// default: it answers.
    func awaitsReply(to command: DeviceCommand) -> Bool
}

// MARK: - Default implementations

extension TrackerCodec {
    public mutating func decodeLast(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult { decode(bytes, now: now) }
    public mutating func limitPieces(by room: @escaping @Sendable (_ deviceID: String) -> TrackerPieceRoom) {}
    public mutating func flush(now: Timestamp) -> [Position] { [] }
    public mutating func outgoing(_ answer: [UInt8]) -> [UInt8] { answer }
    public func answer(_ admission: TrackerAdmission, _ verdict: TrackerAdmissionVerdict) -> [UInt8]? { nil }
    public mutating func idle(now: Timestamp, ending: Bool) -> TrackerIdleOutput { TrackerIdleOutput() }
    public var commandTypes: Set<CommandType> { [] }
    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? { nil }
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? { nil }
    public func awaitsReply(to command: DeviceCommand) -> Bool { true }
}

/// A device's answer to a command the server sent (JT/T 808's 0x0001, a Teltonika Codec 12
/// response, GT06's 0x15/0x21, H02's V4): matched to the command in flight by
/// ``TrackerCodec/outcome(of:sent:)``.
public struct TrackerCommandReply: Sendable, Hashable {
    /// What in the reply names the command (JT/T 808: the reply serial and id); empty when the
    /// protocol answers the one command in flight.
    public var reference: [UInt8]
    /// The protocol's result code, if it has one.
    public var code: Int?
    /// The device's result text, if it sent one.
    public var text: String?

    public init(reference: [UInt8] = [], code: Int? = nil, text: String? = nil) {
        self.reference = reference
        self.code = code
        self.text = text
    }
}

/// What ``TrackerCodec/idle(now:ending:)`` found.
public struct TrackerIdleOutput: Sendable, Hashable {
    /// Answers to write now, in order (each passes ``TrackerCodec/outgoing(_:)``).
    public var answers: [[UInt8]]
    /// Statistics to count once each (`split.expired`).
    public var counts: [String]
    /// The codec holds what has a time of its own (a split message whose missing packets are
    /// asked for again, or dropped at its deadline): call `idle` again each second while the
    /// connection stays quiet.
    public var callAgain: Bool

    public init(answers: [[UInt8]] = [], counts: [String] = [], callAgain: Bool = false) {
        self.answers = answers
        self.counts = counts
        self.callAgain = callAgain
    }
}

/// How much of a codec's room for messages that come in pieces (JT/T 808's split messages) one
/// device's pieces may take (``TrackerCodec/limitPieces(by:)``).
public enum TrackerPieceRoom: Sendable, Hashable {
    /// None: the device must authenticate before its pieces are kept (they are counted
    /// `messages.split_refused`, never answered; the device sends them again).
    case none
    /// A share (a quarter), as several devices send to the room: over UDP, or on a connection
    /// that has not authenticated as the device.
    case share
    /// All of it: the connection authenticated as the device.
    case all
}

/// Bounds every codec keeps.
public struct TrackerLimits: Sendable, Hashable {
    /// A frame larger than this is invalid (a length field of 1 GB is a bad frame, not an allocation).
    public var maxFrameBytes: Int

    /// Limits with the given largest frame, in bytes.
    public init(maxFrameBytes: Int) { self.maxFrameBytes = maxFrameBytes }
}

/// What one call of ``TrackerCodec/decode(_:now:)`` found.
public enum TrackerDecodeResult: Sendable {
    /// A whole, valid frame of `consumed` bytes.
    case message(TrackerMessage, consumed: Int)
    /// The frame at the start is not complete yet.
    case needMore
    /// The bytes at the start are no valid frame: skip `consumed` (at least 1) and count
    /// `error.reason`. With `close`, the stream cannot be resynchronised (a protocol without a
    /// start marker): the connection should be closed so the device reconnects and resends.
    case invalid(TrackerFrameError, consumed: Int, close: Bool)
}

/// Why bytes were not a valid frame. `reason` is a short fixed word for metric labels
/// (`checksum`, `length`, `too_large`, `syntax`, `stop_bytes`, `unsupported`); `detail` says more.
public struct TrackerFrameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The fixed word: `checksum`, `length`, `too_large`, `syntax`, `stop_bytes` or `unsupported`.
    public var reason: String
    /// What exactly was wrong, for logs (may hold values from the frame).
    public var detail: String

    /// An error with a reason word and a detail.
    public init(_ reason: String, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    /// `reason: detail`.
    public var description: String { "\(reason): \(detail)" }
}

/// A decoded frame.
public enum TrackerMessage: Sendable, Hashable {
    /// The device says who it is (Teltonika's IMEI frame, GT06's login). The source decides
    /// whether it may send and writes `accepted` or `refused` (nil: close without an answer).
    case identification(deviceID: String, accepted: [UInt8], refused: [UInt8]?)
    /// Positions. `deviceID` is set when the frame itself names the device (H02, Teltonika
    /// over UDP); otherwise the connection's identification does. `answer` (nil: none) is
    /// written only once every position was handled end to end.
    case records(TrackerRecords)
    /// A frame without positions that is answered at once (heartbeat, time request, status,
    /// a message type kept only as counted); `answer` nil for none. `kind` is a short word for
    /// metric labels (`heartbeat`, `time_request`, `lbs`, `info`, ...). `deviceID` as for records.
    case control(kind: String, deviceID: String?, answer: [UInt8]?)
    /// A device asks to be let in with credentials that only the source can judge (JT/T 808's
    /// registration, authentication and deregistration): the source decides, then writes
    /// ``TrackerCodec/answer(_:_:)``. A device authenticated this way is the connection's device.
    case admission(TrackerAdmission)
    /// The device answered a command (a reply without a position); `answer` is written at once.
    case commandReply(kind: String, deviceID: String?, reply: TrackerCommandReply, answer: [UInt8]?)
}

extension TrackerMessage {
    /// The device the message names itself, if it does.
    public var namedDevice: String? {
        switch self {
        case .identification(let id, _, _): id
        case .records(let r): r.deviceID
        case .control(_, let id, _), .commandReply(_, let id, _, _): id
        case .admission(let a): a.deviceID
        }
    }
}

/// A registration, authentication or deregistration, for the source to decide.
public struct TrackerAdmission: Sendable, Hashable {
    /// What the device asks.
    public enum Request: Sendable, Hashable {
        /// An authentication code; `terminal` is what the device says it is (maker, model,
        /// terminal id), compared with what it said when it registered before.
        case register(terminal: String)
        /// To be let in with the code it was given.
        case authenticate(code: String)
        /// To give its registration up (its code is forgotten); only the device itself may.
        case deregister
    }

    /// A short word for metric labels (`0x0100`).
    public var kind: String
    /// The device the frame names.
    public var deviceID: String
    public var request: Request
    /// What the codec needs to answer it (the frame's header); opaque to the listener.
    public var reply: [UInt8]

    public init(kind: String, deviceID: String, request: Request, reply: [UInt8]) {
        self.kind = kind
        self.deviceID = deviceID
        self.request = request
        self.reply = reply
    }
}

/// What the source decided about a ``TrackerAdmission``.
public enum TrackerAdmissionVerdict: Sendable, Hashable {
    /// Registered: the device authenticates with `code` from now on.
    case registered(code: String)
    /// Authenticated: the connection is the device's.
    case authenticated
    /// The registration is forgotten.
    case deregistered
    /// Refused, and why.
    case refused(Refusal)

    /// Why an admission was refused.
    public enum Refusal: Sendable, Hashable {
        /// The device is not allowed to send (not in `devices`).
        case unknownDevice
        /// Another terminal registered under this device's number.
        case alreadyRegistered
        /// The code is not the one issued (or none was issued).
        case wrongCode
        /// A deregistration that does not come from the device: from a connection that has not
        /// authenticated as it, or over UDP.
        case notAuthenticated
        /// The decision could not be made durable (the state store failed); the device should retry.
        case unavailable
    }
}

/// The positions of one frame and the answer owed once they are committed.
public struct TrackerRecords: Sendable, Hashable {
    /// The device the frame names (H02, Teltonika over UDP); nil when the connection's identification does.
    public var deviceID: String?
    /// The frame's positions in the order the frame holds them (not necessarily by time).
    public var positions: [Position]
    /// Bytes to write once every position was handled end to end; nil for none.
    public var answer: [UInt8]?
    /// A short word for metric labels (`0x0704`), counted as `messages.<kind>`; nil for none.
    public var kind: String?
    /// The frame also answers a command (JT/T 808's 0x0201 answers a position query).
    public var reply: TrackerCommandReply?
    /// Items of the frame that held no position (a batch's fixes off the Earth or cut short),
    /// counted `positions.undecoded`; the answer still goes once the others are handled, since
    /// the device would otherwise send the whole frame again for ever.
    public var undecoded: Int

    /// Records of one frame.
    public init(deviceID: String? = nil, positions: [Position], answer: [UInt8]?, kind: String? = nil, undecoded: Int = 0) {
        self.deviceID = deviceID
        self.positions = positions
        self.answer = answer
        self.kind = kind
        self.undecoded = undecoded
    }
}
