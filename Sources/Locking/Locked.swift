#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a POSIX mutex, used with the shape of `Synchronization.Mutex`:
/// `withLock { (inout State) in … }`.
///
/// Why not `Mutex`: on Linux the standard library's Mutex takes a contended lock through
/// `futex` calls inside the standard library, which ThreadSanitizer does not instrument, so it
/// sees no happens-before edge from the thread that unlocked to the one that then locked, and
/// reports every access the lock guards as a race (`make tsan`). ThreadSanitizer intercepts
/// `pthread_mutex_lock` and `pthread_mutex_unlock` wherever they are called, so this lock is
/// seen without annotations, and its lock-order inversions are reported too. The alternative,
/// Mutex annotated with `__tsan_acquire`/`__tsan_release` looked up by `dlsym`, would need the
/// same wrapper at every use and leave a test of the looked-up pointer on every lock and unlock
/// of the release build.
///
/// Cost: one allocation when the lock is made (the mutex and the state share one object, since
/// a pthread mutex must not move), none per lock operation; glibc's uncontended lock and unlock
/// are one atomic compare-exchange each, as Mutex's are, behind a call. Not recursive: locking
/// it again inside `withLock` deadlocks.
public struct Locked<State>: ~Copyable, @unchecked Sendable {
    /// Owns the state and the mutex; the two pointers below point into it while it lives.
    @usableFromInline
    let storage: LockedStorage<State>
    // Taken once here: ManagedBuffer hands out its header's address through an inout access
    // to the header, which ThreadSanitizer records as a write, so taking it on every lock,
    // before locking, raced with the state's accesses under the lock.
    @usableFromInline
    let state: UnsafeMutablePointer<State>
    @usableFromInline
    let mutex: UnsafeMutablePointer<pthread_mutex_t>

    @inlinable
    public init(_ initialState: consuming sending State) {
        storage = LockedStorage.make(initialState)
        (state, mutex) = storage.withUnsafeMutablePointers { ($0, $1) }
    }

    /// Runs `body` with the state while holding the lock, and returns what it returns.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending State) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // The state is reached only under the lock, so `body` may take it as a region of its own,
        // as Mutex's does. The checker cannot know that of a pointer stored in self; one made
        // from the address alone starts disconnected (`nonisolated(unsafe)` does not reach the pointee).
        let guarded = UnsafeMutablePointer<State>(bitPattern: UInt(bitPattern: self.state)).unsafelyUnwrapped
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&guarded.pointee)
    }
}

/// The object a `Locked` lives in: the state as the buffer's header, the mutex as its one element
/// (one allocation; a pthread mutex must not move).
@usableFromInline
final class LockedStorage<State>: ManagedBuffer<State, pthread_mutex_t> {
    @inlinable
    static func make(_ initialState: sending State) -> LockedStorage<State> {
        let buffer = create(minimumCapacity: 1) { _ in initialState }
        let storage = unsafeDowncast(buffer, to: LockedStorage<State>.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            let status = pthread_mutex_init(mutex, nil)
            precondition(status == 0, "pthread_mutex_init failed: \(status)")
        }
        return storage
    }

    @inlinable
    deinit {
        withUnsafeMutablePointerToElements { mutex in
            pthread_mutex_destroy(mutex)
            _ = mutex.deinitialize(count: 1)
        }
    }
}
