import GatewayCore

/// How a delivering sink's two tasks run together and when they stop (shared by
/// ``OutboxSinkLoop`` and ``OutboxBatchLoop``).
///
/// - The receiving task returns when the input ended, with everything it read committed.
/// - The delivering task returns when the input ended and the queue is empty.
/// - Stop at once when it is safe: once the receiving task is done and the pipeline asks for a
///   prompt stop (``SinkInput/stopRequest``: a signal), a sink whose queue is durable cancels the
///   delivering task — a request in flight is abandoned and stays queued, with its in-flight mark
///   — and returns. A memory queue (`"queue": null`) would lose what is left, so it delivers until
///   the input ends and the queue is empty or the pipeline's deadline cancels it.
/// - A failure of either task cancels the other and is thrown.
public enum OutboxHalves {
    private enum Finished: Sendable { case received, delivered, stopRequested }

    public static func run(input: any SinkInput, writer: OutboxWriter,
                    receive: @escaping @Sendable () async throws -> Void,
                    deliver: @escaping @Sendable () async throws -> Void,
                    onFailure: @Sendable () -> Void = {}) async throws {
        let stop = OutboxOptions.isDurable(writer.mode) ? input.stopRequest : nil
        try await withThrowingTaskGroup(of: Finished.self) { group in
            group.addTask { try await receive(); return .received }
            if OutboxOptions.isDurable(writer.mode) {
                // A durable queue's delivering task runs on the global pool, not the pipeline's
                // threads (which the receiving task, like every source and transform, prefers):
                // reading the queue, building requests and settling acknowledgements are the
                // sink's own work, and on the pipeline's one thread they took the CPU of the sources
                // and transforms (Benchmarks/nmea_replay.py, four transforms into a durable http
                // sink: that thread used 0.29 s where a file sink's run used 0.13 s). A memory
                // queue's stays there: moved, its http sink delivered 20-25% fewer positions a
                // second (Benchmarks/http_sink.sh; two threads on two cores cost more CPU, see
                // PipelineThreads), and it has no fsync to keep off the thread.
                group.addTask(executorPreference: globalConcurrentExecutor) { try await deliver(); return .delivered }
            } else {
                group.addTask { try await deliver(); return .delivered }
            }
            do {
                while let finished = try await group.next() {
                    switch finished {
                    case .received:
                        // Only now: what is still in the input must reach the queue first.
                        if let stop { group.addTask { await stop.wait(); return .stopRequested } }
                    case .delivered:
                        // The stop waiter, if any, ends with the cancellation.
                        group.cancelAll()
                        return
                    case .stopRequested:
                        guard !Task.isCancelled else { throw CancellationError() }
                        let depth = writer.outbox.depth
                        if depth > 0 { writer.context.logger.info("stopping without waiting for delivery: the queue is durable") }
                        group.cancelAll()
                        while true {
                            do {
                                if try await group.next() == nil { return }
                            } catch is CancellationError {}
                        }
                    }
                }
            } catch {
                group.cancelAll()
                onFailure()
                throw error
            }
        }
    }
}
