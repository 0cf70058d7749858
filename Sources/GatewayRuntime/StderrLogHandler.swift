import GatewayCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Writes one line per message to stderr: `2026-11-30T06:40:00.123Z info sources.rx: message`.
public final class StderrLogHandler: LogHandler, Sendable {
    public let minimumLevel: LogLevel
    private let clock: any GatewayClock
    private let lock = Mutex(())

    public init(minimumLevel: LogLevel, clock: any GatewayClock = SystemClock()) {
        self.minimumLevel = minimumLevel
        self.clock = clock
    }

    public func log(level: LogLevel, label: String, message: String) {
        var line: [UInt8] = []
        line.reserveCapacity(64 + message.utf8.count)
        clock.now().appendISO8601(to: &line)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: level.name.utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: label.utf8)
        line.append(contentsOf: ": ".utf8)
        // One line per message: embedded newlines would break log parsing.
        for b in message.utf8 { line.append(b == 10 || b == 13 ? UInt8(ascii: " ") : b) }
        line.append(10)
        lock.withLock { _ in
            line.withUnsafeBytes { buf in
                var offset = 0
                while offset < buf.count {
                    let n = write(2, buf.baseAddress! + offset, buf.count - offset)
                    if n <= 0 { if n < 0 && errno == EINTR { continue }; return }
                    offset += n
                }
            }
        }
    }
}
