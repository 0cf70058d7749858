import SystemIO

/// Whether a peer (gpsd, an NMEA server, an HTTP server, a broker) accepts a TCP connection,
/// for `locgate validate`: a warning only, since a peer that is down now may be up at run time.
public enum PeerCheck {
    /// Connects to `host:port` within `timeout` (per address) and closes at once; nil when a
    /// connection was accepted, else why not (`connect 10.0.0.5:443: Connection refused`, a timeout, a
    /// resolver error). Blocks the calling thread: the checks run on threads of their own.
    public static func tcpProblem(host: String, port: Int, timeout: Duration) -> String? {
        do {
            _ = try Socket.connectBlocking(host: host, port: port, timeout: timeout)
            return nil
        } catch {
            return "\(error)"
        }
    }
}
