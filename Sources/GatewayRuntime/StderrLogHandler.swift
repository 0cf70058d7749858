import GatewayCore
#if canImport(Glibc)
import Glibc
import Locking
#endif

/// Writes one line per message to stderr, in one of three formats:
///
/// - `text`: `2026-11-30T06:40:00.123Z info sources.rx: message`;
/// - `journal`: `<6>info sources.rx: message` — no time (the journal stamps each line) and the
///   syslog priority in front (sd-daemon(3)), so `journalctl -p warning` filters by level;
/// - `json`: `{"time":"…","level":"info","label":"sources.rx","message":"…"}` for log shippers.
///
/// Every message passes through ``Redaction`` first: no secret reaches the log.
public final class StderrLogHandler: LogHandler, Sendable {
    public enum Format: String, Sendable, CaseIterable {
        case text, journal, json
    }

    public let minimumLevel: LogLevel
    public let format: Format
    private let clock: any GatewayClock
    private let lock = Locked(())

    public init(minimumLevel: LogLevel, format: Format = .text, clock: any GatewayClock = .system) {
        self.minimumLevel = minimumLevel
        self.format = format
        self.clock = clock
    }

    /// True when `JOURNAL_STREAM` (`device:inode`, set by systemd for a unit whose stderr is the
    /// journal) names the file stderr is open on. A child that inherited the variable but had its
    /// stderr redirected elsewhere compares unequal and keeps plain text.
    public static func stderrIsJournal(environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }

    /// The syslog priority of a level (sd-daemon's `<N>` prefixes).
    static func syslogPriority(_ level: LogLevel) -> Int {
        switch level {
        case .error: 3
        case .warning: 4
        case .info: 6
        case .debug, .trace: 7
        }
    }

    public func log(level: LogLevel, label: String, message: String) {
        let message = Redaction.redact(message)
        var line: [UInt8] = []
        line.reserveCapacity(64 + message.utf8.count)
        switch format {
        case .text:
            clock.now().appendISO8601(to: &line)
            line.append(UInt8(ascii: " "))
            appendPlain(level: level, label: label, message: message, to: &line)
        case .journal:
            line.append(contentsOf: "<\(StderrLogHandler.syslogPriority(level))>".utf8)
            appendPlain(level: level, label: label, message: message, to: &line)
        case .json:
            line.append(contentsOf: #"{"time":""#.utf8)
            clock.now().appendISO8601(to: &line)
            line.append(contentsOf: #"","level":"#.utf8)
            JSONWriter.appendString(level.name, to: &line)
            line.append(contentsOf: #","label":"#.utf8)
            JSONWriter.appendString(label, to: &line)
            line.append(contentsOf: #","message":"#.utf8)
            JSONWriter.appendString(message, to: &line)
            line.append(UInt8(ascii: "}"))
        }
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

    private func appendPlain(level: LogLevel, label: String, message: String, to line: inout [UInt8]) {
        line.append(contentsOf: level.name.utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: label.utf8)
        line.append(contentsOf: ": ".utf8)
        // One line per message: embedded newlines would break log parsing.
        for b in message.utf8 { line.append(b == 10 || b == 13 ? UInt8(ascii: " ") : b) }
    }
}
