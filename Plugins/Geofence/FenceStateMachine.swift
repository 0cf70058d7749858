import GatewayCore

/// How many confirming positions a transition needs: a count of consecutive positions, or a
/// span of position time during which every position agreed.
public enum FenceThreshold: Sendable, Hashable {
    /// This many consecutive positions (1 = the first one).
    case positions(Int)
    /// Positions agreeing for at least this long (by their times); the first one after it confirms.
    case duration(Duration)

    /// Whether a streak of `count` positions that began at `start` confirms at `now`.
    func isMet(count: Int, start: Timestamp?, now: Timestamp?) -> Bool {
        switch self {
        case .positions(let n): return count >= n
        case .duration(let d):
            guard let start, let now else { return false }
            return now.milliseconds - start.milliseconds >= d.milliseconds
        }
    }
}

/// The hysteresis settings one state machine runs with.
public struct FenceRule: Sendable, Hashable {
    /// Confirmation needed to enter.
    public var minInside: FenceThreshold
    /// Confirmation needed to exit.
    public var minOutside: FenceThreshold
    /// Time inside after which a dwell is reported once per stay; nil for never.
    public var loiter: Duration?

    /// Creates a rule.
    public init(minInside: FenceThreshold, minOutside: FenceThreshold, loiter: Duration? = nil) {
        self.minInside = minInside
        self.minOutside = minOutside
        self.loiter = loiter
    }
}

/// What one position says about one fence, after the border margin.
public enum FenceEvidence: Sendable, Hashable {
    /// Inside, deeper than the margin.
    case inside
    /// Outside, farther than the margin.
    case outside
    /// Within the margin of the boundary: no evidence either way (keeps the current state).
    case border
}

/// Whether one device is inside one fence, with the hysteresis that stops border flapping.
///
/// A transition needs ``FenceRule/minInside`` (or `minOutside`) consecutive positions of
/// evidence against the current state; a position in the border band breaks the streak,
/// as does one agreeing with the current state.
public struct FenceStateMachine: Sendable, Hashable {
    /// Transitions one position caused, in the order they are reported: enter, dwell, exit.
    public struct Action: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The device entered.
        public static let enter = Action(rawValue: 1)
        /// The device has been inside for the loiter time.
        public static let dwell = Action(rawValue: 2)
        /// The device left.
        public static let exit = Action(rawValue: 4)
        /// No transition.
        public static let none: Action = []

        /// The event kinds in report order.
        public var kinds: [FenceEvent.Kind] {
            var k = [FenceEvent.Kind]()
            if contains(.enter) { k.append(.enter) }
            if contains(.dwell) { k.append(.dwell) }
            if contains(.exit) { k.append(.exit) }
            return k
        }
    }

    /// The confirmed state.
    public private(set) var isInside = false
    /// When the current stay began (the first inside position of the confirming streak).
    public private(set) var insideSince: Timestamp?
    /// Positions in the current streak against the confirmed state.
    private var streak = 0
    private var streakStart: Timestamp?
    private var dwelled = false

    /// Creates a machine in the outside state.
    public init() {}

    /// A machine as saved (GeofenceTransform's per-device state).
    init(isInside: Bool, insideSince: Timestamp?, streak: Int, streakStart: Timestamp?, dwelled: Bool) {
        self.isInside = isInside
        self.insideSince = insideSince
        self.streak = max(0, streak)
        self.streakStart = streakStart
        self.dwelled = dwelled
    }

    /// What ``init(isInside:insideSince:streak:streakStart:dwelled:)`` takes back.
    var saved: (streak: Int, streakStart: Timestamp?, dwelled: Bool) { (streak, streakStart, dwelled) }

    /// True when the machine holds nothing worth keeping (outside, no streak): it can be dropped.
    public var isIdle: Bool { !isInside && streak == 0 }

    /// Feeds one position's evidence; `crossed` says the straight segment from the previous
    /// accepted position to this one passed through the fence while both ends were outside
    /// (a sparse track jumping across it), which reports an enter and an exit at once.
    public mutating func event(_ evidence: FenceEvidence, at time: Timestamp?, crossed: Bool = false, rule: FenceRule) -> Action {
        if !isInside {
            switch evidence {
            case .inside:
                if streak == 0 { streakStart = time }
                streak += 1
                guard rule.minInside.isMet(count: streak, start: streakStart, now: time) else { return .none }
                isInside = true
                insideSince = streakStart ?? time
                dwelled = false
                resetStreak()
                return dwellCheck(at: time, rule: rule).union(.enter)
            case .border:
                resetStreak()
                return .none
            case .outside:
                resetStreak()
                return crossed ? [.enter, .exit] : .none
            }
        }
        switch evidence {
        case .outside:
            if streak == 0 { streakStart = time }
            streak += 1
            guard rule.minOutside.isMet(count: streak, start: streakStart, now: time) else { return dwellCheck(at: time, rule: rule) }
            isInside = false
            insideSince = nil
            dwelled = false
            resetStreak()
            return .exit
        case .inside, .border:
            resetStreak()
            return dwellCheck(at: time, rule: rule)
        }
    }

    private mutating func resetStreak() {
        streak = 0
        streakStart = nil
    }

    /// A dwell once per stay, when the stay has lasted the loiter time (by the positions' times).
    private mutating func dwellCheck(at time: Timestamp?, rule: FenceRule) -> Action {
        guard isInside, !dwelled, let loiter = rule.loiter, let since = insideSince, let time,
              time.milliseconds - since.milliseconds >= loiter.milliseconds else { return .none }
        dwelled = true
        return .dwell
    }
}
