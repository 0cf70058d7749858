import CSystemd
import GatewayCore
import GatewayRuntime
import Glibc
import Synchronization

/// Tells systemd the service's state through `sd_notify` (a `Type=notify` unit) and feeds its
/// watchdog while the pipeline makes progress. The only file that talks to libsystemd.
///
/// - `READY=1` once the pipeline built every component and started running (``pipelineStarted(_:)``);
/// - `WATCHDOG=1` at every heartbeat that found the pipeline progressing (see
///   ``PipelineHeartbeat``), every half `WATCHDOG_USEC`; withheld otherwise, so systemd restarts a
///   wedged process;
/// - `STATUS=` the heartbeat's one-line summary, at every heartbeat;
/// - `RELOADING=1` from ``reloading()``, then `READY=1` from ``ready()`` when the reload is done;
/// - `STOPPING=1` from ``stopping()`` (SIGTERM/SIGINT, or the pipeline ending on its own).
///
/// ``fromEnvironment()`` returns nil when `NOTIFY_SOCKET` is unset: outside systemd nothing is sent
/// and no heartbeat runs.
public final class SystemdNotifier: PipelineMonitor, Sendable {
    /// The watchdog interval systemd asked for (`WATCHDOG_USEC` for this process), if any.
    public let watchdog: Duration?
    public let heartbeatInterval: Duration
    public let stallLimit: Duration
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let failureLogged = Atomic<Bool>(false)

    /// Without a watchdog the heartbeat still refreshes `STATUS=` this often.
    static let statusInterval: Duration = .seconds(10)

    private init(watchdog: Duration?, logger: Logger) {
        self.watchdog = watchdog
        self.logger = logger
        // Half the watchdog interval, as sd_watchdog_enabled(3) recommends; STATUS= at least every 10 s.
        self.heartbeatInterval = watchdog.map { min($0 / 2, SystemdNotifier.statusInterval) } ?? SystemdNotifier.statusInterval
        self.stallLimit = watchdog ?? .seconds(30)
    }

    /// A notifier when the process runs under systemd with a notification socket, else nil.
    public static func fromEnvironment(logger: Logger) -> SystemdNotifier? {
        guard let socket = getenv("NOTIFY_SOCKET"), socket.pointee != 0 else { return nil }
        var usec: UInt64 = 0
        // > 0: enabled for this process (WATCHDOG_PID, when set, names it); 0: no watchdog.
        let enabled = sd_watchdog_enabled(0, &usec)
        let watchdog: Duration? = enabled > 0 && usec > 0 ? .microseconds(Int64(clamping: usec)) : nil
        return SystemdNotifier(watchdog: watchdog, logger: logger)
    }

    public func pipelineStarted(_ heartbeat: PipelineHeartbeat) {
        send("READY=1\nSTATUS=running: \(heartbeat.summary)")
    }

    public func heartbeat(_ heartbeat: PipelineHeartbeat) {
        guard !stopped.load(ordering: .relaxed) else { return }
        if watchdog != nil && heartbeat.progressing {
            send("WATCHDOG=1\nSTATUS=running: \(heartbeat.summary)")
        } else {
            send("STATUS=\(heartbeat.progressing ? "running" : "no progress"): \(heartbeat.summary)")
        }
    }

    /// The configuration is being reloaded: `READY=1` (``ready()``) must follow when done.
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        // systemd ≥ 253 wants MONOTONIC_USEC with RELOADING=1 to match the reload to its request.
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        send("RELOADING=1\nMONOTONIC_USEC=\(usec)\nSTATUS=reloading the configuration")
    }

    /// Running again after ``reloading()``.
    public func ready() {
        send("READY=1\nSTATUS=running")
    }

    /// Shutting down: sent once, and heartbeats stop refreshing the status.
    public func stopping(reason: String) {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        send("STOPPING=1\nSTATUS=stopping: \(reason)")
    }

    /// One notification. A failure does not stop the gateway (its supervisor may have gone away),
    /// but the first one is logged: missed keepalives get the service killed, and the journal
    /// should say why.
    private func send(_ state: String) {
        check(sd_notify(0, state), state)
    }

    /// Every libsystemd return code goes through here: negative is `-errno`.
    private func check(_ rc: Int32, _ state: String) {
        guard rc < 0, !failureLogged.exchange(true, ordering: .relaxed) else { return }
        let what = state.prefix { $0 != "\n" }
        logger.warning("sd_notify(\(what)) failed: \(String(cString: strerror(-rc))); later failures are not logged")
    }
}
