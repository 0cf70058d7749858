import DeviceIntake
import GatewayCore
import GatewayTesting
import Synchronization
import SystemIO
import TrackerProtocols

/// A line protocol that exercises every kind of message a tracker codec returns:
///
///     I <id>            identification: answered "OK\n" or "NO\n"
///     P <ms> [<ms>...]  positions at those times: answered "A <first ms>\n" once handled
///     U <id> <ms>       a position that names its device (as H02 does): answered "A <ms>\n"
///     H                 heartbeat: answered "h\n" at once
///     X                 a bad frame (skipped)
///     Z                 a bad frame after which the stream cannot be trusted (closes)
struct LineCodec: TrackerCodec {
    var limits = TrackerLimits(maxFrameBytes: 64)

    mutating func decode(_ bytes: UnsafeRawBufferPointer, now: Timestamp) -> TrackerDecodeResult {
        guard let end = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
            if bytes.count > limits.maxFrameBytes { return .invalid(TrackerFrameError("too_large", "no newline"), consumed: bytes.count, close: false) }
            return .needMore
        }
        if end > limits.maxFrameBytes { return .invalid(TrackerFrameError("too_large", "a long line"), consumed: end + 1, close: false) }
        let line = String(decoding: bytes[..<end], as: UTF8.self)
        let parts = line.split(separator: " ").map(String.init)
        let consumed = end + 1
        switch parts.first {
        case "I" where parts.count == 2:
            return .message(.identification(deviceID: parts[1], accepted: Array("OK\n".utf8), refused: Array("NO\n".utf8)), consumed: consumed)
        case "P" where parts.count >= 2:
            let times = parts.dropFirst().compactMap { Int64($0) }
            let positions = times.map { Position(time: Timestamp(milliseconds: $0), latitude: 1, longitude: 2, mode: .twoD) }
            return .message(.records(TrackerRecords(positions: positions, answer: Array("A \(times[0])\n".utf8))), consumed: consumed)
        case "U" where parts.count == 3:
            let ms = Int64(parts[2]) ?? 0
            let p = Position(time: Timestamp(milliseconds: ms), latitude: 1, longitude: 2, mode: .twoD)
            return .message(.records(TrackerRecords(deviceID: parts[1], positions: [p], answer: Array("A \(ms)\n".utf8))), consumed: consumed)
        case "H":
            return .message(.control(kind: "heartbeat", deviceID: nil, answer: Array("h\n".utf8)), consumed: consumed)
        case "Z":
            return .invalid(TrackerFrameError("syntax", "Z"), consumed: consumed, close: true)
        default:
            return .invalid(TrackerFrameError("syntax", line), consumed: consumed, close: false)
        }
    }
}

/// A running listening source with its context, for one test.
struct RunningListener {
    let context: ComponentContext
    let port: Int
    let task: Task<Void, any Error>

    func stop() async {
        task.cancel()
        _ = await task.result
    }
}

enum Listening {
    static func configuration(_ edit: (inout ListenerConfiguration) -> Void = { _ in }) -> ListenerConfiguration {
        var c = ListenerConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), maxFrameBytes: 64)
        edit(&c)
        return c
    }

    static let devices = DeviceDirectoryConfiguration(entries: [
        "111": DeviceEntry(name: "truck-1", attributes: ["fleet": "north"]),
        "222": DeviceEntry(name: "truck-2"),
    ])

    /// Starts a TCP source with the line codec on a free port and waits until it listens.
    static func start(_ configuration: ListenerConfiguration = configuration(), devices: DeviceDirectoryConfiguration = devices,
                      output: SourceOutput, identifyAtAccept: (@Sendable (SocketAddress) -> String?)? = nil) async throws -> RunningListener {
        let context = SourceConformance.makeContext(id: "trackers")
        let port = LoopbackTCPServer.freePort()
        var c = configuration
        c.listen.port = port
        let source = ListeningSource(protocolName: "line", transport: .tcp(c), directory: devices, context: context,
                                     identifyAtAccept: identifyAtAccept) { _ in LineCodec() }
        let task = Task { try await source.run(output: output) }
        // Listening once a probe connects; the probe counts as accepted, and is gone once closed.
        let listening = await Poll.until { (try? LoopbackTCPClient(port: port)) != nil }
        guard listening else { throw PeerError(description: "the source did not listen on \(port)") }
        _ = await Poll.until { context.stats.value("connections.accepted") >= 1 && context.stats.value("connections.open") == 0 }
        return RunningListener(context: context, port: port, task: task)
    }
}
