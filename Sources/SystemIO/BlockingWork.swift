import Dispatch

/// Blocking calls that have no descriptor to wait on (a C library's blocking write, opening a
/// device, `waitpid`) run here instead of on a cooperative thread: a few blocked sources would
/// otherwise hold every thread of the small pool and stall the rest of the pipeline.
public enum BlockingWork {
    /// Runs `body` on a Dispatch thread and suspends until it returns.
    ///
    /// Cancellation does not interrupt `body`: give it a bounded timeout of its own. Calls from
    /// one task run one after another, so a handle used by one task needs no lock.
    public static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(E) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
