import GatewayCore

/// Merges the sentences of one receiver epoch into one ``Position``.
///
/// An epoch is every sentence from the first with a given time of day up to the next sentence
/// with a different time of day (or an explicit ``flush(into:)``). Sentences without a time
/// (GSA, VTG, HDT, THS) belong to the epoch they arrive in, which is also how gpsd reports them.
///
/// The fix mode follows gpsd's NMEA driver, so output compares with gpsd's TPV `mode`:
/// the last sentence in the epoch that says something about the mode wins; RMC and GLL
/// only claim 2D but keep a 3D fix from before (they carry no altitude); GGA with an
/// altitude claims 3D; GSA states the mode outright; a `V` status, GGA quality 0 or mode
/// indicator `N` mean no fix.
struct EpochAssembler: Sendable {
    private struct Epoch: Sendable {
        var timeOfDay: Int?
        /// A sentence that normally carries a time came with the time field empty.
        var hadEmptyTime = false
        var hasContent = false
        var position: Position
        var mode: FixMode?
        /// A GGA or GNS in this epoch carried an altitude.
        var altitudeFix = false

        init(position: Position) { self.position = position }
    }

    private let options: NMEAOptions
    /// The id prefix of positions without a time when the source has an `untimedToken`.
    private let untimedPrefix: String?
    /// An empty position with this source's origin (datum, source, device), copied to start
    /// each epoch: cheaper than building one every time, and no sentence changes those three.
    private let blank: Position
    private var epoch: Epoch
    /// Days since 1970 of the current UTC date, once RMC or ZDA gave one.
    private var date: Int?
    /// The last RMC date field and its day number: every RMC repeats it all day.
    private var rmcDate: (date: (day: Int, month: Int, year: Int), days: Int)?
    /// The time of day of the last epoch, to notice midnight.
    private var lastTimeOfDay: Int?
    /// Mode of the last emitted epoch: gpsd keeps a 3D fix across RMC/GLL.
    private var lastMode: FixMode = .noFix
    /// Epochs emitted so far; numbers the ids of positions without a time.
    private(set) var emitted = 0
    /// Time of the last emitted epoch and how often it was emitted: an epoch reopened with the
    /// same time (its sentences split by an idle flush) gets a distinct id.
    private var lastTime: Int64 = .min
    private var repeats = 0

    private static let day = 86_400_000
    private static let knotsToMetresPerSecond = 1852.0 / 3600.0

    init(options: NMEAOptions) {
        self.options = options
        untimedPrefix = options.untimedToken.map { "\(options.idPrefix)n\($0)-" }
        blank = Position(datum: .wgs84, source: options.source, device: options.device)
        epoch = Epoch(position: blank)
    }

    /// Adds one sentence, appending the previous epoch to `out` when this one starts a new epoch.
    mutating func add(_ sentence: NMEASentence, into out: inout [Position]) {
        if let tod = sentence.timeOfDay {
            if epoch.timeOfDay != tod {
                if epoch.timeOfDay != nil || epoch.hadEmptyTime {
                    emit(into: &out)
                }
                epoch.timeOfDay = tod
                advanceDate(to: tod)
            }
        } else {
            switch sentence {
            case .rmc, .gga, .gns, .gll, .gst, .zda:
                // A time-bearing sentence without its time (`$GPRMC,,V,…`) ends a timed epoch.
                if epoch.timeOfDay != nil { emit(into: &out) }
                epoch.hadEmptyTime = true
            default: break
            }
        }
        merge(sentence)
    }

    /// Appends the pending epoch, if it holds anything, to `out`.
    mutating func flush(into out: inout [Position]) {
        emit(into: &out)
    }

    // MARK: - Internals

    private mutating func advanceDate(to tod: Int) {
        // From about 23:59 to about 00:00: the date moves on until RMC or ZDA confirms it.
        if let last = lastTimeOfDay, let d = date, tod + Self.day / 2 < last {
            date = d + 1
        }
        lastTimeOfDay = tod
    }

    private var currentMode: FixMode { epoch.mode ?? lastMode }

    private mutating func merge(_ sentence: NMEASentence) {
        // Written in place: copying the position out and back costs more than the parsing.
        switch sentence {
        case .rmc(let s):
            if let d = s.date {
                if let last = rmcDate, last.date == d {
                    date = last.days
                } else {
                    // gpsd's century rule: two-digit years from 81 on are 19xx.
                    let year = d.year > 80 ? 1900 + d.year : 2000 + d.year
                    let days = Timestamp.daysFromCivil(year: year, month: d.month, day: d.day)
                    date = days
                    rmcDate = (d, days)
                }
            }
            if let q = Self.quality(modeIndicator: s.modeIndicator) { epoch.position.quality = q }
            if s.status == 0x41 && s.modeIndicator != 0x4E {
                if let lat = s.latitude, let lon = s.longitude {
                    epoch.position.latitude = lat; epoch.position.longitude = lon
                    epoch.mode = currentMode == .threeD ? .threeD : .twoD
                } else {
                    epoch.mode = .noFix
                }
                if let v = s.speedKnots { epoch.position.speed = v * Self.knotsToMetresPerSecond }
                if let c = s.course { epoch.position.course = c }
            } else {
                epoch.mode = .noFix
            }
        case .gga(let s):
            if let q = s.quality {
                epoch.position.quality = Self.quality(gga: q)
                if q == 0 {
                    epoch.mode = .noFix
                } else if let lat = s.latitude, let lon = s.longitude {
                    epoch.position.latitude = lat; epoch.position.longitude = lon
                    if let alt = s.altitude {
                        epoch.position.altitude = alt
                        epoch.mode = .threeD
                        epoch.altitudeFix = true
                    } else if currentMode != .twoD {
                        epoch.mode = .twoD
                    }
                }
            }
            if let n = s.satellites { epoch.position.satellites = n }
            if let h = s.hdop { epoch.position.hdop = h }
        case .gns(let s):
            if let q = Self.quality(modeIndicator: s.modeIndicator) { epoch.position.quality = q }
            if !s.anyFix {
                epoch.mode = .noFix
            } else if let lat = s.latitude, let lon = s.longitude {
                epoch.position.latitude = lat; epoch.position.longitude = lon
                if let alt = s.altitude {
                    epoch.position.altitude = alt
                    epoch.mode = .threeD
                } else {
                    epoch.mode = .twoD
                }
            }
            if let n = s.satellites { epoch.position.satellites = n }
            if let h = s.hdop { epoch.position.hdop = h }
        case .gll(let s):
            if s.status == 0x41 && s.modeIndicator != 0x4E {
                if let lat = s.latitude, let lon = s.longitude {
                    epoch.position.latitude = lat; epoch.position.longitude = lon
                    epoch.mode = currentMode == .threeD ? .threeD : .twoD
                }
            } else {
                epoch.mode = .noFix
            }
        case .gsa(let s):
            if let m = s.mode, let mode = FixMode(rawValue: m) {
                // gpsd keeps the 3D fix a GGA with altitude gave this epoch when GSA says 2D.
                if !(mode == .twoD && epoch.altitudeFix) { epoch.mode = mode }
            }
            if let v = s.pdop { epoch.position.pdop = v }
            if let v = s.hdop { epoch.position.hdop = v }
            if let v = s.vdop { epoch.position.vdop = v }
        case .gsv:
            return
        case .vtg(let s):
            if s.modeIndicator != 0x4E {
                if let c = s.courseTrue { epoch.position.course = c }
                if let v = s.speedKnots {
                    epoch.position.speed = v * Self.knotsToMetresPerSecond
                } else if let v = s.speedKmh {
                    epoch.position.speed = v / 3.6
                }
            }
        case .zda(let s):
            if let d = s.day, let m = s.month, let y = s.year {
                date = Timestamp.daysFromCivil(year: y, month: m, day: d)
            }
        case .gst(let s):
            if let a = s.latitudeError, let b = s.longitudeError {
                epoch.position.horizontalError = (a * a + b * b).squareRoot()
            }
            if let v = s.altitudeError { epoch.position.verticalError = v }
        case .heading(let h, let valid):
            if valid, let h { epoch.position.heading = h }
        }
        epoch.hasContent = true
    }

    private mutating func emit(into out: inout [Position]) {
        guard epoch.hasContent else {
            // Nothing was merged, so the position is still blank.
            resetEpoch()
            return
        }
        let mode = epoch.mode ?? lastMode
        let timeOfDay = epoch.timeOfDay
        resetEpoch()
        lastMode = mode
        // Moved out, the blank copied in its place, finished and moved into the output: the
        // position itself is never copied (a copy retains and later releases each of its
        // strings) nor swapped through a temporary.
        var p = withUnsafeMutablePointer(to: &epoch.position) { position in
            defer { position.initialize(to: blank) }
            return position.move()
        }
        finish(&p, mode: mode, timeOfDay: timeOfDay)
        out.append(consume p)
    }

    /// Gives a merged position its mode, time and id (the blank it started from has its origin).
    private mutating func finish(_ p: inout Position, mode: FixMode, timeOfDay: Int?) {
        p.mode = mode
        if mode == .noFix {
            // gpsd reports no coordinates without a fix; neither do we.
            p.latitude = nil; p.longitude = nil; p.altitude = nil
        }
        if let tod = timeOfDay, let d = date {
            p.time = Timestamp(milliseconds: Int64(d) * Int64(Self.day) + Int64(tod))
        }
        emitted += 1
        if let t = p.time {
            if t.milliseconds == lastTime {
                repeats += 1
                p.id = "\(PositionID(prefix: options.idPrefix, number: t.milliseconds))-\(repeats)"
            } else {
                p.identifier = PositionID(prefix: options.idPrefix, number: t.milliseconds)
                lastTime = t.milliseconds
                repeats = 0
            }
        } else if let prefix = untimedPrefix {
            p.identifier = PositionID(prefix: prefix, number: Int64(emitted))
        } else {
            p.identifier = PositionID(prefix: options.idPrefix, marker: UInt8(ascii: "n"), number: Int64(emitted))
        }
    }

    /// Starts a new epoch; the caller has already left `epoch.position` blank.
    private mutating func resetEpoch() {
        epoch.timeOfDay = nil
        epoch.hadEmptyTime = false
        epoch.hasContent = false
        epoch.mode = nil
        epoch.altitudeFix = false
    }

    /// gpsd's status for a GGA quality digit.
    static func quality(gga q: Int) -> FixQuality {
        switch q {
        case 1: .gps
        case 2: .dgps
        case 3: .precise
        case 4: .rtkFixed
        case 5: .rtkFloat
        case 6: .estimated
        case 7: .manual
        case 8: .simulated
        default: .unknown
        }
    }

    /// gpsd's status for an RMC/GLL/GNS/VTG mode indicator.
    static func quality(modeIndicator c: UInt8?) -> FixQuality? {
        switch c {
        case 0x41: .gps           // A autonomous
        case 0x44: .dgps          // D differential
        case 0x45: .estimated     // E dead reckoning
        case 0x46: .rtkFloat      // F
        case 0x52: .rtkFixed      // R
        case 0x4D: .manual        // M
        case 0x53: .simulated     // S
        case 0x50: .precise       // P
        case 0x4E: .unknown       // N no fix
        default: nil
        }
    }
}
