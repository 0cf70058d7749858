import GatewayCore
import SystemIO

extension Wakeup {
    /// Waits until one of `fds` is ready, the task is cancelled, or `deadline` on `clock` is
    /// reached; returns what is ready (empty at the deadline, on cancellation and on an early
    /// return: the caller looks at the clock again).
    ///
    /// On the system clock the deadline is `poll`'s own timeout. A clock a test drives wakes the
    /// wait through a timer (``GatewayClock/wake(at:_:)``) that signals the pipe, drained again
    /// afterwards unless the task was cancelled (a cancellation's signal stays, as it must).
    public func readiness(_ fds: [Int32], until deadline: MonotonicInstant, clock: any GatewayClock) async -> [Readiness] {
        let timeout = max(.zero, deadline - clock.monotonicNow())
        guard !clock.isReal else { return await readiness(fds, timeout: timeout) }
        let timer = clock.wake(at: deadline) { [self] in signal() }
        let ready = await readiness(fds, timeout: timeout)
        timer.cancel()
        if !Task.isCancelled { clear() }
        return ready
    }

    /// ``readiness(_:until:clock:)`` for a wait of `timeout` from now.
    public func readiness(_ fds: [Int32], timeout: Duration, clock: any GatewayClock) async -> [Readiness] {
        await readiness(fds, until: clock.monotonicNow() + timeout, clock: clock)
    }

    /// ``readiness(_:timeout:clock:)`` with only the descriptors.
    public func wait(_ fds: [Int32], timeout: Duration, clock: any GatewayClock) async -> [Int32] {
        await readiness(fds, timeout: timeout, clock: clock).map(\.fd)
    }
}
