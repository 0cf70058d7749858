/// What an environment check found about a component: a file that cannot be read, a directory
/// that cannot be written, a peer that does not answer, the free space under a queue.
///
/// `locgate validate` runs every component's checks (unless `--no-environment`): an error means
/// `run` would fail to start, so it fails validation (exit 2); a warning is something that may
/// fix itself (a peer that is down now, a serial port not plugged in yet); info is shown as is.
public struct EnvironmentFinding: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable, Comparable {
        case info, warning, error

        public static func < (a: Severity, b: Severity) -> Bool { a.rank < b.rank }
        private var rank: Int { self == .info ? 0 : self == .warning ? 1 : 2 }
    }

    public var severity: Severity
    /// The JSON path of the option the finding is about, e.g. `sinks.upload.queue.path`.
    public var path: String
    /// What was found and why, naming the resolved file path and the system's reason.
    public var message: String

    public init(_ severity: Severity, path: String, message: String) {
        self.severity = severity
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(severity.rawValue): \(message)" }
}

/// What a component's environment check is given: where its options sit, and how long a peer
/// gets to answer.
public struct EnvironmentContext: Sendable {
    /// The component's JSON path, e.g. `sinks.upload`.
    public let path: String
    /// How long a reachability probe (a TCP connect) may take.
    public let peerTimeout: Duration

    public init(path: String, peerTimeout: Duration = .seconds(2)) {
        self.path = path
        self.peerTimeout = peerTimeout
    }

    /// The JSON path of `key` (dotted for nested options: `queue.path`).
    public func path(of key: String) -> String { key.isEmpty ? path : "\(path).\(key)" }

    public func error(_ key: String, _ message: String) -> EnvironmentFinding { EnvironmentFinding(.error, path: path(of: key), message: message) }
    public func warning(_ key: String, _ message: String) -> EnvironmentFinding { EnvironmentFinding(.warning, path: path(of: key), message: message) }
    public func info(_ key: String, _ message: String) -> EnvironmentFinding { EnvironmentFinding(.info, path: path(of: key), message: message) }
}
