#if canImport(Glibc)
import Glibc
#endif

/// A system call that failed, with what was being done and the system's reason (errno's text,
/// `getaddrinfo`'s text, or a timeout).
public struct SystemError: Error, Sendable, CustomStringConvertible {
    /// What was being done, e.g. `connect 127.0.0.1:2947`.
    public var operation: String
    /// The reason, e.g. `Connection refused`.
    public var message: String
    /// The errno value when the failure came from one, so callers can classify it.
    public var code: Int32?

    public init(operation: String, message: String, code: Int32? = nil) {
        self.operation = operation
        self.message = message
        self.code = code
    }

    /// `operation: message`.
    public var description: String { "\(operation): \(message)" }

    /// The failure errno describes (read it right after the failing call).
    public static func errno(_ operation: String, _ code: Int32 = Glibc.errno) -> SystemError {
        SystemError(operation: operation, message: String(cString: strerror(code)), code: code)
    }

    /// Nothing happened within `timeout`.
    static func timedOut(_ operation: String, after timeout: Duration) -> SystemError {
        SystemError(operation: operation, message: "timed out after \(timeout)", code: ETIMEDOUT)
    }
}
