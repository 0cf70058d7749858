import GatewayCore
import Locking

/// A component's `run` (a source's or a sink's) in a task the conformance checks can abandon: a
/// component that ignores cancellation must fail the check, not hang the test run, so this is the
/// one place in the test kit that uses an unstructured task.
final class AbandonableRun: Sendable {
    /// How `run` ended: it returned (or threw `CancellationError`), or it threw something else.
    enum Ending: Sendable { case returned, threw(String) }

    private final class EndingBox: Sendable {
        let value = Locked<Ending?>(nil)
    }

    let task: Task<Void, Never>
    private let box: EndingBox

    init(_ run: @escaping @Sendable () async throws -> Void) {
        let box = EndingBox()
        self.box = box
        task = Task {
            do {
                try await run()
                box.value.withLock { $0 = .returned }
            } catch is CancellationError {
                box.value.withLock { $0 = .returned }
            } catch {
                box.value.withLock { $0 = .threw(String(describing: error)) }
            }
        }
    }

    /// How `run` ended; nil while it runs.
    var ended: Ending? { box.value.withLock { $0 } }

    /// Waits up to `bound` for `run` to end; nil if it did not.
    func wait(within bound: Duration) async -> Ending? {
        _ = await Poll.until(timeout: bound) { self.ended != nil }
        return ended
    }

    /// Cancels and waits up to `bound` for `run` to end; nil if it did not.
    func stop(within bound: Duration) async -> Ending? {
        task.cancel()
        return await wait(within: bound)
    }
}
