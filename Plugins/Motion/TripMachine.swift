import GatewayCore

/// Whether one device is stopped or on a trip, robust to GPS drift: the state machine behind
/// `trip_start`, `trip_end`, `stop_start` and `stop_end`.
///
/// ```
///            left stop_radius_m around the stop's centre,        covered min_trip_distance_m
///            or fast for moving_duration                         or lasted min_trip_duration
///  stopped ───────────────────────────────────────────▶ moving ─────────────────────────────▶ trip
///     ▲   the trip starts at the last slow fix of the stop   │    (stop_end + trip_start,    │
///     │                                                       │     dated where it left)      │
///     │   a move that never became a trip: the stop goes on   │                               │
///     ◀───────────────────────────────────────────────────────┘                               │
///     │   stayed within stop_radius_m of a slow fix for min_stop_duration, a gap, ignition off│
///     ◀───────────────────────────────────────────────────────────────────────────────────────┘
///            (trip_end + stop_start, dated at that slow fix, or at the last fix before a gap)
/// ```
///
/// Everything is decided in position time, on on-time fixes only (the transform keeps late ones
/// out), so a replay makes the same decisions and the machine's state is all a restart needs.
/// Events are dated where they happened, not when they were confirmed: a trip's end is the first
/// fix of the stop that followed, found `min_stop_duration` later.
struct TripMachine: Sendable, Hashable {
    /// A stop: where and when it began, whether it was reported, and the centre of its fixes.
    struct Stop: Sendable, Hashable {
        var start: MotionFix
        /// `stop_start` was reported (it lasted `min_stop_duration`, or ended a trip, or a gap made it one).
        var confirmed: Bool
        var centre: Centre
    }

    /// Stopped: the stop, and where a trip leaving it now would start.
    struct Stopped: Sendable, Hashable {
        var stop: Stop
        /// From the newest slow fix within the radius to the last fix: a trip starts there.
        var rest: Leg
        /// When the current run of fast fixes began.
        var fastSince: Timestamp?
    }

    /// A fix within the radius of a slow fix that may be the first of a stop.
    struct Candidate: Sendable, Hashable {
        /// The trip up to the candidate's first fix: the trip if the stop is confirmed.
        var leg: Leg
        var first: MotionFix
        var centre: Centre
        var fastSince: Timestamp?
    }

    /// Moving: the move so far, whether it is a trip yet, the stop it left, a stop that may be beginning.
    struct Moving: Sendable, Hashable {
        var trip: Leg
        /// `trip_start` was reported.
        var confirmed: Bool
        /// The stop left, until the move becomes a trip (it goes on if the move never does).
        var previous: Stop?
        var candidate: Candidate?
    }

    enum Phase: Sendable, Hashable {
        case stopped(Stopped)
        case moving(Moving)
    }

    /// What one fix decided, in order.
    enum Outcome: Sendable, Hashable {
        case stopStarted(Stop)
        case stopEnded(Stop, end: MotionFix)
        case tripStarted(MotionFix)
        case tripEnded(Leg, end: MotionFix)
    }

    /// Nil before the device's first fix.
    var phase: Phase?
    /// The previous on-time fix.
    var last: MotionFix?

    /// The stop going on and reported, if any: the current one, or the one a move that is not a
    /// trip yet left (idling goes on through such a move).
    var reportedStop: Stop? {
        switch phase {
        case .stopped(let s)?: s.stop.confirmed ? s.stop : nil
        case .moving(let m)?: m.previous.flatMap { $0.confirmed ? $0 : nil }
        case nil: nil
        }
    }

    /// Feeds one on-time fix; appends what it decided to `out`. When the fix came after a gap,
    /// returns how many of the outcomes appended belong to the gap (they come first, dated at or
    /// before the last fix before it); nil otherwise.
    @discardableResult
    mutating func feed(_ fix: MotionFix, ignition: Bool?, rules: MotionConfiguration, into out: inout [Outcome]) -> Int? {
        guard let last, let phase else {
            self.last = fix
            self.phase = .stopped(Stopped(stop: Stop(start: fix, confirmed: false, centre: Centre(fix)), rest: Leg(fix),
                                          fastSince: isFast(fix, rules) ? fix.time : nil))
            return nil
        }
        self.last = fix
        if fix.milliseconds(since: last.time) >= rules.gap.milliseconds {
            // No fix for `gap`: a stop from the last fix before it. The fix after it is the first
            // one known of what followed: a trip leaving now starts there, not across the gap.
            let before = out.count
            var stopped = stopForGap(phase, last: last, into: &out)
            let gapOutcomes = out.count - before
            stopped.rest = Leg(fix)
            stopped.fastSince = nil
            whileStopped(stopped, fix, ignition: ignition, step: nil, rules: rules, into: &out)
            return gapOutcomes
        }
        let step = last.distance(to: fix)
        switch phase {
        case .stopped(let s): whileStopped(s, fix, ignition: ignition, step: step, rules: rules, into: &out)
        case .moving(let m): whileMoving(m, fix, ignition: ignition, step: step, rules: rules, into: &out)
        }
        return nil
    }

    private func isFast(_ fix: MotionFix, _ rules: MotionConfiguration) -> Bool {
        guard let v = fix.speed else { return false }
        return v >= rules.movingSpeed
    }

    /// `fastSince` after `fix`, and whether the run of fast fixes has lasted `moving_duration`.
    private func fastRun(_ since: Timestamp?, _ fix: MotionFix, _ rules: MotionConfiguration) -> (since: Timestamp?, sustained: Bool) {
        guard isFast(fix, rules) else { return (nil, false) }
        let start = since ?? fix.time
        return (start, fix.milliseconds(since: start) >= rules.movingDuration.milliseconds)
    }

    private mutating func whileStopped(_ stopped: Stopped, _ fix: MotionFix, ignition: Bool?, step: Double?, rules: MotionConfiguration,
                                       into out: inout [Outcome]) {
        var s = stopped
        let away = s.stop.centre.distance(to: fix) > rules.stopRadius
        let fast = fastRun(s.fastSince, fix, rules)
        s.fastSince = fast.since
        let held = rules.useIgnition && ignition == false
        if (away || fast.sustained) && !held {
            // It left: the move starts at the last slow fix of the stop, so neither the distance
            // nor the time it took to leave the radius is lost.
            var trip = s.rest
            if let step { trip.extend(to: fix, step: step) }
            var m = Moving(trip: trip, confirmed: false, previous: s.stop, candidate: nil)
            confirmTripIfDue(&m, now: fix, rules: rules, into: &out)
            phase = .moving(m)
            return
        }
        if let step { s.rest.extend(to: fix, step: step) }
        if !away {
            s.stop.centre.add(fix)
            if !isFast(fix, rules) { s.rest = Leg(fix) }
        }
        if !s.stop.confirmed && fix.milliseconds(since: s.stop.start.time) >= rules.minStopDuration.milliseconds {
            s.stop.confirmed = true
            out.append(.stopStarted(s.stop))
        }
        phase = .stopped(s)
    }

    private mutating func whileMoving(_ moving: Moving, _ fix: MotionFix, ignition: Bool?, step: Double, rules: MotionConfiguration,
                                      into out: inout [Outcome]) {
        var m = moving
        m.trip.extend(to: fix, step: step)
        if rules.useIgnition && ignition == false {
            arrive(m, end: fix, leg: m.trip, centre: Centre(fix), now: fix, rules: rules, into: &out)
            return
        }
        if var c = m.candidate {
            let fast = fastRun(c.fastSince, fix, rules)
            c.fastSince = fast.since
            if c.centre.distance(to: fix) > rules.stopRadius || fast.sustained {
                m.candidate = nil
            } else {
                c.centre.add(fix)
                m.candidate = c
            }
        }
        if m.candidate == nil && !isFast(fix, rules) {
            m.candidate = Candidate(leg: m.trip, first: fix, centre: Centre(fix), fastSince: nil)
        }
        if let c = m.candidate, fix.milliseconds(since: c.first.time) >= rules.minStopDuration.milliseconds {
            arrive(m, end: c.first, leg: c.leg, centre: c.centre, now: fix, rules: rules, into: &out)
            return
        }
        confirmTripIfDue(&m, now: fix, rules: rules, into: &out)
        phase = .moving(m)
    }

    /// A move becomes a trip once it covered `min_trip_distance_m` or lasted `min_trip_duration`,
    /// both counted up to where it may have stopped already (a stop being confirmed is not a trip).
    private func confirmTripIfDue(_ m: inout Moving, now: MotionFix, rules: MotionConfiguration, into out: inout [Outcome]) {
        guard !m.confirmed else { return }
        let distance = m.candidate?.leg.distance ?? m.trip.distance
        let end = m.candidate?.first.time ?? now.time
        guard distance >= rules.minTripDistance || end.milliseconds - m.trip.start.time.milliseconds >= rules.minTripDuration.milliseconds else { return }
        m.confirmed = true
        if let previous = m.previous, previous.confirmed { out.append(.stopEnded(previous, end: m.trip.start)) }
        out.append(.tripStarted(m.trip.start))
        m.previous = nil
    }

    /// The move ended at `end` (the first fix of a stop, an ignition off, the last fix before a
    /// gap): a trip ends there, or a move that was no trip returns to the stop it left.
    private mutating func arrive(_ m: Moving, end: MotionFix, leg: Leg, centre: Centre, now: MotionFix, rules: MotionConfiguration,
                                 into out: inout [Outcome]) {
        phase = .stopped(Stopped(stop: settle(m, end: end, leg: leg, centre: centre, into: &out), rest: Leg(now),
                                 fastSince: isFast(now, rules) ? now.time : nil))
    }

    private func settle(_ m: Moving, end: MotionFix, leg: Leg, centre: Centre, into out: inout [Outcome]) -> Stop {
        if m.confirmed {
            let stop = Stop(start: end, confirmed: true, centre: centre)
            out.append(.tripEnded(leg, end: end))
            out.append(.stopStarted(stop))
            return stop
        }
        if var previous = m.previous, previous.confirmed {
            // Moved less than a trip (across a car park): the same stop, where the device is now.
            previous.centre = centre
            return previous
        }
        let stop = Stop(start: end, confirmed: true, centre: centre)
        out.append(.stopStarted(stop))
        return stop
    }

    /// The state after `gap` without a fix: stopped since the last fix before it (where the
    /// device came to rest, if it had), and that stop reported.
    private func stopForGap(_ phase: Phase, last: MotionFix, into out: inout [Outcome]) -> Stopped {
        switch phase {
        case .stopped(var s):
            if !s.stop.confirmed {
                s.stop.confirmed = true
                out.append(.stopStarted(s.stop))
            }
            return s
        case .moving(let m):
            let stop = if let c = m.candidate {
                settle(m, end: c.first, leg: c.leg, centre: c.centre, into: &out)
            } else {
                settle(m, end: last, leg: m.trip, centre: Centre(last), into: &out)
            }
            return Stopped(stop: stop, rest: Leg(last), fastSince: nil)
        }
    }
}
