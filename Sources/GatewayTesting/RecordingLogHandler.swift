import GatewayCore
import Locking

/// A ``LogHandler`` that keeps every line, for tests that check what a component logged.
public final class RecordingLogHandler: LogHandler, Sendable {
    /// One recorded line.
    public struct Entry: Sendable, Hashable, CustomStringConvertible {
        public var level: LogLevel
        public var label: String
        public var message: String
        public var description: String { "\(level.name) \(label): \(message)" }
    }

    public let minimumLevel: LogLevel
    private let lines = Locked<[Entry]>([])

    public init(minimumLevel: LogLevel = .trace) {
        self.minimumLevel = minimumLevel
    }

    public func log(level: LogLevel, label: String, message: String) {
        lines.withLock { $0.append(Entry(level: level, label: label, message: message)) }
    }

    /// Every line so far.
    public var entries: [Entry] { lines.withLock { $0 } }

    /// Lines at `level` (or all levels) whose message contains `text`.
    public func entries(level: LogLevel? = nil, containing text: String = "") -> [Entry] {
        entries.filter { (level == nil || $0.level == level) && (text.isEmpty || $0.message.contains(text)) }
    }

    /// A logger with this handler.
    public func logger(label: String) -> Logger { Logger(label: label, handler: self) }
}
