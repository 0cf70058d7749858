/// Severity of a log line; `--log-level` and the `log_level` setting pick the minimum shown.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case trace, debug, info, warning, error

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    public var name: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }

    public init?(name: String) {
        guard let l = LogLevel.allCases.first(where: { $0.name == name.lowercased() }) ?? (name.lowercased() == "warn" ? .warning : nil) else { return nil }
        self = l
    }
}

/// Where log lines go. The runtime provides one that writes to stderr; tests provide one that records.
public protocol LogHandler: Sendable {
    /// The lowest level this handler writes; lines below it are never formatted.
    var minimumLevel: LogLevel { get }
    /// Writes one line for `label` (a component id such as `sources.receiver`).
    func log(level: LogLevel, label: String, message: String)
}

/// A component's logger: a label plus the process's handler. Libraries accept one, never create one.
public struct Logger: Sendable {
    public let label: String
    public let handler: any LogHandler

    public init(label: String, handler: any LogHandler) {
        self.label = label
        self.handler = handler
    }

    /// A logger for a sub-part, labelled `label.suffix`.
    public func child(_ suffix: String) -> Logger { Logger(label: "\(label).\(suffix)", handler: handler) }

    @inlinable public func isEnabled(_ level: LogLevel) -> Bool { level >= handler.minimumLevel }

    @inlinable public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        if level >= handler.minimumLevel { handler.log(level: level, label: label, message: message()) }
    }

    @inlinable public func trace(_ message: @autoclosure () -> String) { log(.trace, message()) }
    @inlinable public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    @inlinable public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    @inlinable public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    @inlinable public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}

/// A handler that drops everything (for tools and tests that do not care).
public struct SilentLogHandler: LogHandler {
    public init() {}
    public var minimumLevel: LogLevel { .error }
    public func log(level: LogLevel, label: String, message: String) {}
}
