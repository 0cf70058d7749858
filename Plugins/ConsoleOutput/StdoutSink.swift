import GatewayCore
import PositionEncoding
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Configuration of the `stdout` sink.
public struct StdoutSinkConfiguration: Sendable {
    public enum Format: String, Sendable, CaseIterable { case jsonl, text }
    public var format = StdoutSinkPlugin.format.defaultValue
}

/// Prints positions on standard output, one line each.
public struct StdoutSink: PositionSink {
    let configuration: StdoutSinkConfiguration
    let context: ComponentContext
    /// Standard output; a test gives a pipe it reads.
    var fd: Int32 = 1

    public func run(input: any SinkInput) async throws {
        var bytes: [UInt8] = []
        var textCache = PositionJSON.TextCache()
        let wakeup = try Wakeup()
        while let batch = await input.next() {
            bytes.removeAll(keepingCapacity: true)
            switch configuration.format {
            case .jsonl: PositionFormat.jsonl.appendRecords(batch, to: &bytes, cache: &textCache)
            case .text: for p in batch { StdoutSink.appendText(p, to: &bytes) }
            }
            try await StdoutSink.writeAll(bytes, to: fd, wakeup: wakeup)
            input.acknowledge()
            context.stats.addEmitted(batch.count)
        }
    }

    /// Writes everything. A reader that stops reading (a paused pager, `| sleep`) fills the pipe:
    /// the sink then waits for room through `wakeup`, off the pipeline's thread and ended by
    /// cancellation, so it neither stops the other components nor holds shutdown past its deadline.
    static func writeAll(_ bytes: [UInt8], to fd: Int32 = 1, wakeup: Wakeup) async throws {
        var done = 0
        while done < bytes.count {
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&pfd, 1, 0)
            if ready < 0 {
                if errno == EINTR { continue }
                throw StdoutSinkError(message: "cannot wait for standard output: \(String(cString: strerror(errno)))")
            }
            if ready == 0 {
                _ = await wakeup.wait([fd], events: Int16(POLLOUT), timeout: .seconds(1))
                try Task.checkCancellation()
                continue
            }
            // At most PIPE_BUF bytes once poll said writable: a pipe takes them without blocking.
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, min($0.count - done, Int(PIPE_BUF))) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw StdoutSinkError(message: "cannot write to standard output: \(String(cString: strerror(errno)))")
            }
            done += n
        }
    }

    /// `2020-03-18T13:28:20.600Z 3D DGPS 41.574970205 -93.750558641 278.0m 1.67m/s 92.3° 9sat hdop 1.0 eph 4.8m wgs84 rx`.
    static func appendText(_ p: Position, to out: inout [UInt8]) {
        func text(_ s: String) { out.append(contentsOf: s.utf8) }
        func num(_ v: Double, _ d: Int) { JSONWriter.appendNumber(v, decimals: d, to: &out) }
        if let t = p.time { t.appendISO8601(to: &out) } else { text("-                       ") }
        switch p.mode {
        case .threeD: text(" 3D")
        case .twoD: text(" 2D")
        case .noFix: text(" --")
        case .unknown: text(" ??")
        }
        if let q = p.quality, q != .gps, q != .unknown { text(" \(q.name.uppercased())") }
        if let lat = p.latitude, let lon = p.longitude { text(" "); num(lat, 9); text(" "); num(lon, 9) } else { text(" no position") }
        if let x = p.x, let y = p.y { text(" x="); num(x, 3); text(" y="); num(y, 3) }
        if let a = p.altitude { text(" "); num(a, 1); text("m") }
        if let s = p.speed { text(" "); num(s, 2); text("m/s") }
        if let c = p.course { text(" "); num(c, 1); text("°") }
        if let s = p.satellites { text(" \(s)sat") }
        if let h = p.hdop { text(" hdop "); num(h, 1) }
        if let e = p.horizontalError { text(" eph "); num(e, 1); text("m") }
        if p.datum != .wgs84 { text(" \(p.datum.name)") }
        if let e = p.event { text(" \(e.kind.rawValue.uppercased())"); if let what = e.fenceName ?? e.fenceId ?? e.status { text(" \(what)") } }
        for k in p.attributes.keys.sorted() { text(" \(k)=\(p.attributes[k] ?? "")") }
        text(" \(p.device ?? p.source)\n")
    }
}

struct StdoutSinkError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// The `stdout` sink.
public enum StdoutSinkPlugin: SinkPlugin {
    public static let format = Option("format", default: StdoutSinkConfiguration.Format.jsonl,
        "JSON Lines (gpsd TPV names) or a readable line per position.")

    public static let info = PluginInfo(
        type: "stdout", kind: .sink,
        summary: "Prints positions on standard output: JSON Lines or one human-readable line each.",
        folder: "ConsoleOutput",
        options: [
            format.spec,
        ],
        sample: #"{ "type": "stdout", "inputs": ["receiver"], "format": "text" }"#
    )

    public static func configure(_ options: inout OptionReader) -> StdoutSinkConfiguration {
        var c = StdoutSinkConfiguration()
        c.format = options.read(format)
        return c
    }

    public static func claims(of configuration: StdoutSinkConfiguration) -> [String] { [] }

    public static func makeSink(_ configuration: StdoutSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        StdoutSink(configuration: configuration, context: context)
    }
}
