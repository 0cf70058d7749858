/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
///
/// For tests that wait on a peer or a background task: it waits only as long as needed, and a
/// condition that never holds fails after `timeout` instead of hanging the suite.
public func eventually(within timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}
