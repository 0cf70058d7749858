import GatewayCore

/// A source that plays a script: batches of positions, raw bytes and pauses, in order.
///
/// Use it to drive transforms, sinks and whole pipelines without a device. Bytes go through the
/// `decodeBytes` closure given at creation (an NMEA decoder, say); without one they are counted
/// as bad input (`scripted.undecoded_bytes`), the way a real source counts noise.
public struct ScriptedSource: PositionSource {
    /// One step of the script.
    public enum Step: Sendable {
        /// Emits these positions as one batch.
        case positions([Position])
        /// Hands these bytes to the byte decoder and emits what it returns.
        case bytes([UInt8])
        /// Pauses on the source's clock (a ``ManualClock`` makes this instantaneous and test-driven).
        case delay(Duration)
    }

    public let steps: [Step]
    /// After the last step: end (`false`, like a replay) or wait for cancellation (`true`, like a live device).
    public let holdOpen: Bool
    let clock: any GatewayClock
    let stats: ComponentStats?
    let decodeBytes: (@Sendable ([UInt8]) -> [Position])?

    /// Creates a source that plays `steps`; `stats` receives `emitted` and bad-input counts.
    public init(_ steps: [Step], holdOpen: Bool = false, clock: any GatewayClock = .system,
                stats: ComponentStats? = nil, decodeBytes: (@Sendable ([UInt8]) -> [Position])? = nil) {
        self.steps = steps
        self.holdOpen = holdOpen
        self.clock = clock
        self.stats = stats
        self.decodeBytes = decodeBytes
    }

    public func run(output: SourceOutput) async throws {
        for step in steps {
            try Task.checkCancellation()
            switch step {
            case .positions(let p):
                await output.emit(p)
            case .bytes(let b):
                if let decode = decodeBytes {
                    await output.emit(decode(b))
                } else {
                    stats?.count("scripted.undecoded_bytes", by: b.count)
                }
            case .delay(let d):
                try await clock.sleep(for: d)
            }
        }
        if holdOpen {
            // A live source never ends by itself: wait here until the task is cancelled.
            while true { try await clock.sleep(for: .seconds(3600)) }
        }
    }
}
