import Locking

/// Runs the queue writes that ``TrailingDelete`` decides on for a batch sink with a durable queue:
/// one task at a time behind the requests, each write followed by the one queued behind it.
///
/// Called by the delivering task alone; a write's end is told to the machine from the write's
/// own task, under the lock, and the write queued behind it runs in that same task.
final class TrailingWrites: Sendable {
    /// Performs one write; `behind`: it runs behind a request (nobody waits for it).
    typealias Perform = @Sendable (_ write: TrailingDelete.Write, _ behind: Bool) async throws -> Void

    private struct State {
        var machine = TrailingDelete()
        /// What the last failed write threw, until the loop takes it.
        var failure: (any Error)?
        /// The task running the writes behind the requests.
        var task: Task<Void, Never>?
    }

    private let state = Locked(State())
    private let perform: Perform

    init(perform: @escaping Perform) { self.perform = perform }

    /// Records up to here were handed to a write (finished or running).
    var through: Int64 { state.withLock { $0.machine.through } }

    /// A batch goes on a durable queue without a durable mark: starts (or queues) the delete of
    /// what was delivered up to `accepted` with the batch's in-flight mark, behind the request.
    /// Throws what the last write threw (a fault that ends the sink).
    func behind(accepted: Int64, marking mark: Int64?, count: Int) throws {
        let decision = state.withLock { $0.machine.behind(accepted: accepted, marking: mark, count: count) }
        switch decision {
        case .nothing: return
        case .fail: throw takeFailure()
        case .start(let write): start(write)
        }
    }

    /// A write the request waits for (or the delete when nothing is left to send), after the
    /// writes running behind; throws what any of them threw.
    func awaited(accepted: Int64, marking mark: Int64?, count: Int, durably: Bool) async throws {
        await finish()
        let write: TrailingDelete.Write?
        do {
            write = try state.withLock { s throws(TrailingDelete.Failed) in
                try s.machine.awaited(accepted: accepted, marking: mark, count: count, durably: durably)
            }
        } catch {
            throw takeFailure()
        }
        guard let write else { return }
        try await perform(write, false)
        state.withLock { $0.machine.written(through: accepted) }
    }

    /// Waits for the writes running behind the requests, if any (their failure is kept for the
    /// loop's next look).
    func finish() async {
        let task = state.withLock { s in
            defer { s.task = nil }
            return s.task
        }
        await task?.value
    }

    /// Cancels the writes running behind (a write already on the queue's thread still runs).
    func cancel() { state.withLock { $0.task }?.cancel() }

    private func start(_ first: TrailingDelete.Write) {
        let task = Task {
            var write = first
            while true {
                var failure: (any Error)?
                do { try await perform(write, true) } catch { failure = error }
                let next = state.withLock { s in
                    if let failure { s.failure = failure }
                    return s.machine.writeEnded(failed: failure != nil)
                }
                guard let next else { return }
                write = next
            }
        }
        state.withLock { $0.task = task }
    }

    private func takeFailure() -> any Error {
        state.withLock { s in
            defer { s.failure = nil }
            return s.failure ?? CancellationError()
        }
    }
}
