import Foundation

/// The threads a pipeline's components run on (`settings.threads`): the tasks of its sources
/// (with the transforms they call), sinks and transform ticks prefer this executor. The
/// supervisor, heartbeat, stats line and shutdown deadlines stay on the global pool.
///
/// One thread by default. A gateway moves a few positions a second per receiver, a bulk replay
/// hundreds of thousands; either way one thread does the work in the least CPU time. With a source's task and a
/// sink's on two cores, every function of both took 20-30% more CPU time than when the two took
/// turns on one core (same instructions; the cores of a virtual machine share execution units or
/// caches), so a 1M-sentence replay took 0.48 s of CPU for 0.34 s of wall time on the global
/// pool, and 0.39 s of CPU for 0.41 s on one thread. More threads buy wall time with CPU time:
/// for a central gateway whose sinks encode for many inputs at once, or a replay in a hurry.
///
/// Components do not wait on these threads: waits on descriptors go through `Wakeup`, calls with
/// nothing to wait on through `BlockingWork`, and C libraries' network loops have threads of
/// their own. A durable queue's SQLite commits run on a thread of the queue's own (their `fsync`
/// would hold every component here); writes of the file sink do run here. A component that
/// blocks anyway stops every component sharing the thread; the heartbeat reports it
/// (``activity``). Unstructured tasks a component starts (`Task { }`) do not inherit the
/// preference and run on the global pool.
///
/// Swift's runtime on Linux has no executor backed by threads of one's own (Dispatch queues are
/// not executors there): this is a queue of jobs under a condition variable. Threads start as
/// jobs come, up to `count`, and end after ``stop()`` once the queue is empty.
public final class PipelineThreads: TaskExecutor, @unchecked Sendable {
    public let count: Int
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    private var head = 0
    private var idle = 0
    private var running = 0
    private var stopping = false
    private let name: String
    /// Jobs begun and ended, for the heartbeat: a job that never ends is a component blocking a
    /// thread (a synchronous wait, a runaway loop), and every component behind it waits.
    let activity = ActivityProbe()

    /// Up to `count` threads named `name` (numbered when there are several), started as jobs come.
    public init(count: Int, name: String = "locgate") {
        precondition(count >= 1, "a pipeline needs a thread")
        self.count = count
        self.name = name
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        if idle > 0 {
            condition.signal()
        } else if running < count {
            // The first jobs, or one after `stop()` (a continuation resumed late: a thread runs it and ends).
            spawn()
        }
        condition.unlock()
    }

    /// Lets the threads end once no job is left. Jobs enqueued later still run.
    public func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    /// Threads running now (for tests: 0 some time after ``stop()``).
    public var liveThreads: Int {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// Caller holds the lock.
    private func spawn() {
        running += 1
        let label = count == 1 ? name : "\(name)-\(running)"
        let thread = Thread {
            PipelineThreads.nameCurrentThread(label)
            self.work()
        }
        thread.start()
    }

    /// Gives the calling thread its name in the kernel (`top -H`, `/proc/…/task/…/comm`), through
    /// its `comm` file (proc(5)): Glibc's `pthread_setname_np` is not visible to Swift, and
    /// Foundation's `Thread.name`, even set from the new thread, did not always reach the kernel
    /// (in 4 of 150 three-thread pipelines a thread kept the name of the Dispatch thread that
    /// started it). Without /proc the thread keeps its inherited name: the name is only a label.
    static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    private func work() {
        let executor = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        condition.lock()
        while true {
            while head == jobs.count {
                if stopping {
                    running -= 1
                    condition.unlock()
                    return
                }
                idle += 1
                condition.wait()
                idle -= 1
            }
            if count == 1 {
                // Alone: every queued job in one turn of the lock.
                swap(&batch, &jobs)
            } else {
                // One job each, so the other threads find the rest.
                batch.append(jobs[head])
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                } else if head >= 1024 && 2 * head >= jobs.count {
                    // A queue that never empties: drop the jobs taken, now and then.
                    jobs.removeFirst(head)
                    head = 0
                }
            }
            condition.unlock()
            for job in batch {
                activity.enter()
                job.runSynchronously(on: executor)
                activity.exit()
            }
            batch.removeAll(keepingCapacity: true)
            condition.lock()
        }
    }
}
