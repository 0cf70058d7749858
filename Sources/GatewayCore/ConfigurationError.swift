/// One problem found in a configuration, located by its JSON path.
public struct ConfigurationProblem: Sendable, Hashable, CustomStringConvertible {
    /// Dotted JSON path, e.g. `sinks.upload.batch.interval`; `$` for the document itself.
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}

/// A configuration that cannot run, with every problem found in it.
///
/// Validation never stops at the first problem: the user fixes a file once, not once per error.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]

    public init(problems: [ConfigurationProblem]) { self.problems = problems }

    public var description: String {
        let n = problems.count
        return "invalid configuration (\(n) problem\(n == 1 ? "" : "s")):\n" + problems.map { "  \($0)" }.joined(separator: "\n")
    }
}

/// Collects problems while a configuration is read; shared by the readers of one document.
public final class ConfigurationDiagnostics {
    public private(set) var problems: [ConfigurationProblem] = []

    public init() {}

    public func report(_ path: String, _ message: String) {
        problems.append(ConfigurationProblem(path: path, message: message))
    }

    public var isEmpty: Bool { problems.isEmpty }
}
