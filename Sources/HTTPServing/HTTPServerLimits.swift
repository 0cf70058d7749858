extension HTTPServer {
    /// What one server accepts from its clients; every default is written here once.
    ///
    /// A refused or closed connection is counted in ``HTTPServer/Statistics`` by reason.
    public struct Limits: Sendable, Equatable {
        /// Connections served at once (default 1024). One more is closed as soon as it is
        /// accepted (``HTTPServer/Statistics/refusedLimit``). Suspended requests and streams count.
        /// Each connection is a file descriptor: keep the process's `RLIMIT_NOFILE` above the sum
        /// of every server's limit and what the rest of the process opens.
        public var connections: Int
        /// Connections from one client address at once; 0, the default, means no limit. One more
        /// is closed as soon as it is accepted (``HTTPServer/Statistics/refusedPerAddress``).
        public var connectionsPerAddress: Int
        /// A connection that sends and receives nothing for this long is closed (default 10 s; in
        /// whole seconds, at least 1). A suspended connection does not time out.
        public var idleTimeout: Duration
        /// From the connection's accept, or the end of its previous response, to the last byte of
        /// its request (default 30 s). A client that sends slower than this, however steadily, is
        /// disconnected (``HTTPServer/Statistics/deadlineClosed``) within a quarter of it (at most
        /// a second) past it. Keep it above ``idleTimeout``: a kept-alive connection that sends
        /// nothing after its answer is then closed as idle rather than counted as late.
        public var requestDeadline: Duration
        /// The largest request body in bytes (default 1 MiB). A larger `Content-Length` is
        /// answered `413` before any of the body is read; a chunked body is cut off (the
        /// connection closed) when its bytes pass it (``HTTPServer/Statistics/tooLarge``).
        public var maximumBodySize: Int

        /// Limits with the defaults for whatever is not given.
        public init(connections: Int = 1024, connectionsPerAddress: Int = 0, idleTimeout: Duration = .seconds(10),
                    requestDeadline: Duration = .seconds(30), maximumBodySize: Int = 1 << 20) {
            self.connections = connections
            self.connectionsPerAddress = connectionsPerAddress
            self.idleTimeout = idleTimeout
            self.requestDeadline = requestDeadline
            self.maximumBodySize = maximumBodySize
        }

        /// Every problem with these limits, empty when they can be used.
        public var problems: [String] {
            var found: [String] = []
            if connections < 1 || connections > 1_000_000 { found.append("connections must be 1 to 1000000, got \(connections)") }
            if connectionsPerAddress < 0 || connectionsPerAddress > 1_000_000 {
                found.append("connectionsPerAddress must be 0 (no limit) to 1000000, got \(connectionsPerAddress)")
            }
            if idleTimeout < .seconds(1) || idleTimeout > .seconds(86_400) { found.append("idleTimeout must be 1 s to 1 day, got \(idleTimeout)") }
            if requestDeadline < .milliseconds(100) || requestDeadline > .seconds(86_400) {
                found.append("requestDeadline must be 100 ms to 1 day, got \(requestDeadline)")
            }
            if maximumBodySize < 0 { found.append("maximumBodySize must not be negative, got \(maximumBodySize)") }
            return found
        }
    }
}
