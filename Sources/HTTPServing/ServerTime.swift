import GatewayCore
#if canImport(Glibc)
import Glibc
#endif

/// The server's own clock arithmetic: a monotonic clock for deadlines, and durations in the
/// units libmicrohttpd takes.
extension HTTPServer {
    /// Intervals here must not jump with the wall clock.
    static func monotonicMilliseconds() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Int64(t.tv_sec) * 1000 + Int64(t.tv_nsec) / 1_000_000
    }

    /// libmicrohttpd's timeouts are whole seconds: rounded up, at least 1.
    static func wholeSeconds(_ d: Duration) -> UInt32 {
        UInt32(clamping: max(1, (d.milliseconds + 999) / 1000))
    }
}
