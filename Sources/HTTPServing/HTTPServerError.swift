/// A failure to start the server: the address cannot be bound, TLS files are unusable, the
/// settings are invalid.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, with the address or file concerned.
    public var description: String

    /// An error that says `description`.
    public init(description: String) { self.description = description }
}
