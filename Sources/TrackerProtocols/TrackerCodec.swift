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

    /// Positions the codec still holds (an NMEA epoch waiting for more sentences): called once
    /// the connection has been quiet for a second, and when it ends. Tracker frames hold
    /// nothing: the default returns none.
    mutating func flush(now: Timestamp) -> [Position]
}

// MARK: - Default implementations

extension TrackerCodec {
    public mutating func flush(now: Timestamp) -> [Position] { [] }
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
}

/// The positions of one frame and the answer owed once they are committed.
public struct TrackerRecords: Sendable, Hashable {
    /// The device the frame names (H02, Teltonika over UDP); nil when the connection's identification does.
    public var deviceID: String?
    /// The frame's positions in the order the frame holds them (not necessarily by time).
    public var positions: [Position]
    /// Bytes to write once every position was handled end to end; nil for none.
    public var answer: [UInt8]?

    /// Records of one frame.
    public init(deviceID: String? = nil, positions: [Position], answer: [UInt8]?) {
        self.deviceID = deviceID
        self.positions = positions
        self.answer = answer
    }
}
