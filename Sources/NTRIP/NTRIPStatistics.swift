import GatewayCore

/// What an NTRIP client did, since it started.
public struct NTRIPStatistics: Sendable, Equatable {
    /// Body bytes from the caster (after chunked decoding), frames with a good CRC-24Q, by
    /// message number, CRC failures and bytes outside frames.
    public var bytes = 0
    public var frames = 0
    public var framesByType: [Int: Int] = [:]
    public var crcFailures = 0
    public var junkBytes = 0
    /// Frames the writer could not take (the port was closed or failing).
    public var writeFailures = 0
    /// Connections tried, and those that delivered corrections.
    public var attempts = 0
    public var connections = 0
    /// Attempts after the first.
    public var reconnects: Int { max(0, attempts - 1) }
    public var unauthorized = 0
    public var stalls = 0
    public var ggaSent = 0
    /// Connected to the mountpoint now.
    public var connected = false
    /// The last delay before a new attempt.
    public var lastDelay: Duration?
    /// When the last frame was written.
    public var lastFrameAt: Timestamp?
    /// The client's clock at its last look (tests wait for it to pass an instant).
    public var lastTick: Timestamp?

    public init() {}
}
