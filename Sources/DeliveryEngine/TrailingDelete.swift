/// Where the queue writes of a batch sink with a durable queue stand: the deletes of delivered
/// records and the in-flight marks that run behind its requests (``OutboxBatchLoop``), so the
/// next batch goes without waiting for the queue's thread, which may be busy committing.
///
/// A state machine with no tasks, locks or SQLite: the loop feeds it events and performs what it
/// returns (``TrailingWrites`` runs the writes).
///
/// ```
///            behind(…): .start(w)                writeEnded(failed: false), nothing queued
///   idle ──────────────────────────▶ running ──────────────────────────────────────────▶ idle
///    ▲  ▲                             │  ▲ │ behind(…) with a mark: queued (a newer one replaces it)
///    │  │ written(through:)           │  └─┘ writeEnded: the queued write runs next
///    │  └── awaited(…): the write ◀───┘ (the loop waited for the running write first)
///    │                                │ writeEnded(failed: true): `through` goes back
///    └──── behind(…): .fail ◀──── failed
/// ```
///
/// - One write at a time: the next starts when the last is done and deletes everything delivered
///   by then, so writes never pile up on the queue's thread while it commits.
/// - At most one write waits behind the running one: a full batch's in-flight mark, with the
///   delete of what was delivered before it (a mark covers the queue from its front). A newer one
///   replaces it (the batch before was answered by then, so its mark no longer matters) and
///   deletes as far as the two.
/// - `through`: records up to it were handed to a write (done or running). A write that fails
///   gives its range back (and drops the one waiting), so the stop's cleanup deletes it again;
///   the failure ends the sink at the loop's next look.
struct TrailingDelete: Sendable {
    /// One write on the queue's thread: deletes the records up to `deleting` (the peer took
    /// them) and marks the batch ending at `marking` in flight (`count` records), in one
    /// transaction, synced when `durably`.
    struct Write: Equatable, Sendable {
        var deleting: Int64?
        var marking: Int64?
        var count: Int
        var durably = false
    }

    enum Phase: Equatable, Sendable {
        case idle
        /// A write runs behind the requests.
        case running
        /// The last write failed: the loop hears of it at its next look.
        case failed
    }

    /// What to do before a request, with nothing waited for.
    enum Behind: Equatable, Sendable {
        /// Nothing to write now (or the write was queued behind the running one).
        case nothing
        /// Start this write behind the request.
        case start(Write)
        /// The last write failed: the sink fails.
        case fail
    }

    private(set) var phase = Phase.idle
    /// Records up to here were handed to a write (finished or running).
    private(set) var through: Int64 = 0
    /// `through` before the running write: where it goes back if that write fails.
    private var before: Int64 = 0
    /// The write waiting behind the running one.
    private(set) var queued: Write?

    /// A batch goes on a durable queue without a durable mark; `accepted` is the last seq the
    /// peer took, `mark` the batch's last seq when marks are kept. Idle: the delete of what was
    /// delivered, with the mark, starts behind the request. Running: a mark is queued behind the
    /// running write with that delete; without a mark there is nothing to do (a later write
    /// deletes as far as was delivered then).
    mutating func behind(accepted: Int64, marking mark: Int64?, count: Int) -> Behind {
        let deleting = accepted > through ? accepted : nil
        switch phase {
        case .failed:
            phase = .idle
            return .fail
        case .running:
            guard let mark else { return .nothing }
            through = max(through, deleting ?? 0)
            let far = [queued?.deleting, deleting].compactMap { $0 }.max()
            queued = Write(deleting: far, marking: mark, count: count)
            return .nothing
        case .idle:
            guard deleting != nil || mark != nil else { return .nothing }
            before = through
            through = max(through, accepted)
            phase = .running
            return .start(Write(deleting: deleting, marking: mark, count: count))
        }
    }

    /// The running write ended; returns the write queued behind it, which runs next (nil: idle).
    mutating func writeEnded(failed: Bool) -> Write? {
        guard phase == .running else { return nil }
        if failed {
            through = before
            queued = nil
            phase = .failed
            return nil
        }
        guard let next = queued else {
            phase = .idle
            return nil
        }
        queued = nil
        return next
    }

    /// A write the request waits for (a durable mark; any write on a memory queue), or the
    /// delete when nothing is left to send: the loop waited for the running write first. Returns
    /// the write to make now (nil: nothing), or throws ``Failed`` when the write it waited for failed.
    mutating func awaited(accepted: Int64, marking mark: Int64?, count: Int, durably: Bool) throws(Failed) -> Write? {
        if phase == .failed {
            phase = .idle
            throw Failed()
        }
        let deleting = accepted > through ? accepted : nil
        guard deleting != nil || mark != nil else { return nil }
        return Write(deleting: deleting, marking: mark, count: count, durably: durably)
    }

    /// An awaited write succeeded: records up to `accepted` are deleted.
    mutating func written(through accepted: Int64) {
        through = max(through, accepted)
    }

    /// The write the loop waited for failed (its error is the driver's to throw).
    struct Failed: Error {}
}
