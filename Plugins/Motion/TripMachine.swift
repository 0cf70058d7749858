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
///     │   from a slow fix on, stayed within stop_radius_m of the fixes' centre for            │
///     │   min_stop_duration; or a gap; or ignition off (use_ignition)                         │
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

    /// A run of slow fixes within the radius of their centre that may be the start of a stop:
    /// what every fix looks at. Plain numbers, copied for nothing (see ``Arrival``).
    struct Candidate: Sendable, Hashable {
        var centre: Centre
        /// The time of its first fix.
        var since: Timestamp
        var fastSince: Timestamp?
        /// The trip's distance at its first fix.
        var distance: Double
    }

    /// Where the trip ends if the candidate becomes a stop: its first fix, and the trip up to it.
    /// Read only then, kept apart from ``Candidate`` because a fix's id is a reference.
    struct Arrival: Sendable, Hashable {
        var leg: Leg
        var first: MotionFix
    }

    /// What one fix decided, in order.
    enum Outcome: Sendable, Hashable {
        case stopStarted(Stop)
        case stopEnded(Stop, end: MotionFix)
        case tripStarted(MotionFix)
        case tripEnded(Leg, end: MotionFix)
    }

    // The state is flat rather than an enum with the two phases as payloads: a payload is copied
    // out and back for every change (a retain and a release of each fix's id), a field is
    // changed where it lies. Which fields mean something depends on `moving`:
    //
    //   stopped: `stop` (the current one), `rest`, `fastSince`
    //   moving:  `trip`, `tripConfirmed`, `stop` (the stop it left, until the move is a trip),
    //            `candidate` and `arrival` (both or neither)

    /// The previous on-time fix; nil before the device's first.
    var last: MotionFix?
    var moving = false
    var stop: Stop?
    /// Stopped: from the newest slow fix within the radius to the last fix; a trip starts there.
    var rest: Leg?
    /// Stopped: when the current run of fast fixes began.
    var fastSince: Timestamp?
    /// Moving: the move so far.
    var trip: Leg?
    /// Moving: `trip_start` was reported.
    var tripConfirmed = false
    var candidate: Candidate?
    var arrival: Arrival?

    /// The stop going on and reported, if any: the current one, or the one a move that is not a
    /// trip yet left (idling goes on through such a move).
    var reportedStop: Stop? {
        guard let stop, stop.confirmed else { return nil }
        return stop
    }

    /// Feeds one on-time fix; appends what it decided to `out`. `scale` is the local plane at the
    /// fix (``MotionGeometry/scale(at:)``). When the fix came after a gap, returns how many of the
    /// outcomes appended belong to the gap (they come first, dated at or before the last fix
    /// before it); nil otherwise.
    @discardableResult
    mutating func feed(_ fix: MotionFix, ignition: Bool?, scale: PlaneScale, rules: MotionConfiguration, into out: inout [Outcome]) -> Int? {
        guard let last else {
            self = TripMachine()
            self.last = fix
            stop = Stop(start: fix, confirmed: false, centre: Centre(fix))
            rest = Leg(fix)
            fastSince = isFast(fix, rules) ? fix.time : nil
            return nil
        }
        self.last = fix
        if fix.milliseconds(since: last.time) >= rules.ms.gap {
            // No fix for `gap`: a stop from the last fix before it. The fix after it is the first
            // one known of what followed: a trip leaving now starts there, not across the gap.
            let before = out.count
            stopForGap(last: last, into: &out)
            let gapOutcomes = out.count - before
            rest = Leg(fix)
            fastSince = nil
            whileStopped(fix, ignition: ignition, step: nil, scale: scale, rules: rules, into: &out)
            return gapOutcomes
        }
        let step = scale.distance(last, fix)
        if moving {
            whileMoving(fix, ignition: ignition, step: step, scale: scale, rules: rules, into: &out)
        } else {
            whileStopped(fix, ignition: ignition, step: step, scale: scale, rules: rules, into: &out)
        }
        return nil
    }

    private func isFast(_ fix: MotionFix, _ rules: MotionConfiguration) -> Bool {
        guard let v = fix.speed else { return false }
        return v >= rules.movingSpeed
    }

    /// A run of fast fixes after `fix`: when it began, and whether it has lasted `moving_duration`.
    private func fastRun(_ since: Timestamp?, _ fix: MotionFix, _ rules: MotionConfiguration) -> (since: Timestamp?, sustained: Bool) {
        guard isFast(fix, rules) else { return (nil, false) }
        let start = since ?? fix.time
        return (start, fix.milliseconds(since: start) >= rules.ms.moving)
    }

    private mutating func whileStopped(_ fix: MotionFix, ignition: Bool?, step: Double?, scale: PlaneScale, rules: MotionConfiguration,
                                       into out: inout [Outcome]) {
        guard let centre = stop?.centre, rest != nil else { return }
        let away = scale.distance(centre, fix) > rules.stopRadius
        let fast = fastRun(fastSince, fix, rules)
        fastSince = fast.since
        if (away || fast.sustained) && !(rules.useIgnition && ignition == false) {
            // It left: the move starts at the last slow fix of the stop, so neither the distance
            // nor the time it took to leave the radius is lost.
            if let step { rest?.extend(to: fix, step: step) }
            trip = rest
            rest = nil
            fastSince = nil
            moving = true
            tripConfirmed = false
            candidate = nil
            arrival = nil
            confirmTripIfDue(now: fix, rules: rules, into: &out)
            return
        }
        if let step { rest?.extend(to: fix, step: step) }
        if !away {
            stop?.centre.add(fix)
            if !isFast(fix, rules) { rest = Leg(fix) }
        }
        // Fields read through the optional, not the stop copied out: this runs for every fix.
        if stop?.confirmed == false, let start = stop?.start.time, fix.milliseconds(since: start) >= rules.ms.minStop {
            stop?.confirmed = true
            out.append(.stopStarted(stop!))
        }
    }

    private mutating func whileMoving(_ fix: MotionFix, ignition: Bool?, step: Double, scale: PlaneScale, rules: MotionConfiguration,
                                      into out: inout [Outcome]) {
        trip?.extend(to: fix, step: step)
        if rules.useIgnition && ignition == false, let trip {
            arrive(end: fix, leg: trip, centre: Centre(fix), now: fix, rules: rules, into: &out)
            return
        }
        let slow = !isFast(fix, rules)
        if let c = candidate {
            let fast = fastRun(c.fastSince, fix, rules)
            if scale.distance(c.centre, fix) > rules.stopRadius || fast.sustained {
                candidate = nil
                arrival = nil
            } else {
                candidate?.fastSince = fast.since
                candidate?.centre.add(fix)
            }
        }
        if candidate == nil && slow, let trip {
            candidate = Candidate(centre: Centre(fix), since: fix.time, fastSince: nil, distance: trip.distance)
            arrival = Arrival(leg: trip, first: fix)
        }
        if let c = candidate, fix.milliseconds(since: c.since) >= rules.ms.minStop, let a = arrival {
            arrive(end: a.first, leg: a.leg, centre: c.centre, now: fix, rules: rules, into: &out)
            return
        }
        confirmTripIfDue(now: fix, rules: rules, into: &out)
    }

    /// A move becomes a trip once it covered `min_trip_distance_m` or lasted `min_trip_duration`,
    /// both counted up to where it may have stopped already (a stop being confirmed is not a trip).
    private mutating func confirmTripIfDue(now: MotionFix, rules: MotionConfiguration, into out: inout [Outcome]) {
        guard !tripConfirmed, let distance = candidate?.distance ?? trip?.distance, let start = trip?.start.time else { return }
        let end = candidate?.since ?? now.time
        guard distance >= rules.minTripDistance || end.milliseconds - start.milliseconds >= rules.ms.minTrip, let trip else { return }
        tripConfirmed = true
        if let previous = stop, previous.confirmed { out.append(.stopEnded(previous, end: trip.start)) }
        out.append(.tripStarted(trip.start))
        stop = nil
    }

    /// The move ended at `end` (the first fix of a stop, an ignition off, the last fix before a
    /// gap): a trip ends there, or a move that was no trip returns to the stop it left. `now` is
    /// the newest fix, the stop's rest.
    private mutating func arrive(end: MotionFix, leg: Leg, centre: Centre, now: MotionFix, rules: MotionConfiguration, into out: inout [Outcome]) {
        settle(end: end, leg: leg, centre: centre, into: &out)
        rest = Leg(now)
        fastSince = isFast(now, rules) ? now.time : nil
    }

    /// Leaves the moving phase with a stop from `end`: reported after a trip, or the stop the move
    /// left going on where the device now is (a move across a car park).
    private mutating func settle(end: MotionFix, leg: Leg, centre: Centre, into out: inout [Outcome]) {
        if tripConfirmed {
            out.append(.tripEnded(leg, end: end))
            stop = Stop(start: end, confirmed: true, centre: centre)
            out.append(.stopStarted(stop!))
        } else if let previous = stop, previous.confirmed {
            stop?.centre = centre
        } else {
            stop = Stop(start: end, confirmed: true, centre: centre)
            out.append(.stopStarted(stop!))
        }
        moving = false
        trip = nil
        tripConfirmed = false
        candidate = nil
        arrival = nil
    }

    /// After `gap` without a fix: stopped since the last fix before it (where the device came to
    /// rest, if it had), and that stop reported.
    private mutating func stopForGap(last: MotionFix, into out: inout [Outcome]) {
        if moving {
            if let c = candidate, let a = arrival {
                settle(end: a.first, leg: a.leg, centre: c.centre, into: &out)
            } else if let trip {
                settle(end: last, leg: trip, centre: Centre(last), into: &out)
            }
        } else if let s = stop, !s.confirmed {
            stop?.confirmed = true
            out.append(.stopStarted(stop!))
        }
    }
}
