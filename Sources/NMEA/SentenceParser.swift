import GatewayCore

/// What the decoder learned from one checked sentence body.
enum SentenceKind {
    case sentence(NMEASentence)
    case unknown
    case proprietary
    case badField
}

/// Parses checked sentence bodies (the bytes between `$` and `*`) of any talker.
enum SentenceParser {
    /// Three-letter sentence formatters packed into an integer for a cheap switch.
    @inline(__always)
    private static func code(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> UInt32 {
        UInt32(a) << 16 | UInt32(b) << 8 | UInt32(c)
    }

    private static let rmc = code(0x52, 0x4D, 0x43)
    private static let gga = code(0x47, 0x47, 0x41)
    private static let gns = code(0x47, 0x4E, 0x53)
    private static let gll = code(0x47, 0x4C, 0x4C)
    private static let gsa = code(0x47, 0x53, 0x41)
    private static let gsv = code(0x47, 0x53, 0x56)
    private static let vtg = code(0x56, 0x54, 0x47)
    private static let zda = code(0x5A, 0x44, 0x41)
    private static let gst = code(0x47, 0x53, 0x54)
    private static let hdt = code(0x48, 0x44, 0x54)
    private static let ths = code(0x54, 0x48, 0x53)

    /// Classifies and parses one body; `memos` carry field texts from one sentence to the next.
    static func parse(body: UnsafeRawBufferPointer, memos: inout FieldReader.Memos) -> SentenceKind {
        if body.count < 8 || !isStandardAddress(body) {
            var addressLength = 0
            while addressLength < body.count && body[addressLength] != 0x2C { addressLength += 1 }
            guard addressLength >= 1 else { return .unknown }
            if body[0] == 0x50 { return .proprietary }  // `P…`: vendor sentences
            // A standard address is a two-letter talker and a three-letter formatter.
            guard addressLength == 5 else { return .unknown }
            for i in 0..<5 {
                let c = body[i]
                guard (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) else { return .unknown }
            }
        }
        var f = FieldReader(body: body, addressEndingAt: 5)
        let sentence: NMEASentence
        switch code(body[2], body[3], body[4]) {
        case rmc: sentence = parseRMC(&f, &memos)
        case gga: sentence = parseGGA(&f, &memos)
        case gns: sentence = parseGNS(&f, &memos, body: body)
        case gll: sentence = parseGLL(&f, &memos)
        case gsa: sentence = parseGSA(&f)
        case gsv: sentence = parseGSV(&f)
        case vtg: sentence = parseVTG(&f)
        case zda: sentence = parseZDA(&f, &memos)
        case gst: sentence = parseGST(&f, &memos)
        case hdt:
            let heading = f.decimal()
            _ = f.flag("T")
            sentence = .heading(heading, valid: true)
        case ths:
            let heading = f.decimal()
            let status = f.flag("AEMSV")
            sentence = .heading(heading, valid: status != 0x56)
        default: return .unknown
        }
        return f.failed ? .badField : .sentence(sentence)
    }

    /// True when `body` (eight bytes or more) starts with five capital letters or digits and a
    /// comma, and not with `P`: the address of nearly every sentence, checked in one word (the
    /// body's bytes are printable ASCII, so the per-byte sums do not carry). False sends the
    /// body to the byte-by-byte checks, which also tell proprietary and unknown addresses apart.
    @inline(__always)
    private static func isStandardAddress(_ body: UnsafeRawBufferPointer) -> Bool {
        let w = UInt64(littleEndian: body.loadUnaligned(as: UInt64.self))
        let digit = WordBytes.inRange(w, 0x30, 0x3A)
        let capital = WordBytes.inRange(w, 0x41, 0x5B)
        let firstFive: UInt64 = 0x80_8080_8080
        return (digit | capital) & firstFive == firstFive && (w >> 40) & 0xFF == 0x2C && w & 0xFF != 0x50
    }

    private static func parseRMC(_ f: inout FieldReader, _ memos: inout FieldReader.Memos) -> NMEASentence {
        var s = NMEASentence.RMC()
        s.time = f.timeOfDay(&memos.time)
        s.status = f.flag("AV")
        s.latitude = f.coordinate(positive: 0x4E, negative: 0x53, limit: 90, &memos.latitude)
        s.longitude = f.coordinate(positive: 0x45, negative: 0x57, limit: 180, &memos.longitude)
        s.speedKnots = f.decimal()
        s.course = f.decimal()
        s.date = f.dateDDMMYY()
        _ = f.decimal()  // magnetic variation
        _ = f.flag("EW")
        s.modeIndicator = f.flag("ADEFMNPRS")
        return .rmc(s)
    }

    private static func parseGGA(_ f: inout FieldReader, _ memos: inout FieldReader.Memos) -> NMEASentence {
        var s = NMEASentence.GGA()
        s.time = f.timeOfDay(&memos.time)
        s.latitude = f.coordinate(positive: 0x4E, negative: 0x53, limit: 90, &memos.latitude)
        s.longitude = f.coordinate(positive: 0x45, negative: 0x57, limit: 180, &memos.longitude)
        s.quality = f.integer()
        if let q = s.quality, q > 9 { f.failed = true }
        s.satellites = f.integer()
        if let n = s.satellites, n > Position.maximumSatellites { f.failed = true }
        s.hdop = f.decimal()
        s.altitude = f.decimal()
        return .gga(s)
    }

    private static func parseGNS(_ f: inout FieldReader, _ memos: inout FieldReader.Memos, body: UnsafeRawBufferPointer) -> NMEASentence {
        let time = f.timeOfDay(&memos.time)
        let latitude = f.coordinate(positive: 0x4E, negative: 0x53, limit: 90, &memos.latitude)
        let longitude = f.coordinate(positive: 0x45, negative: 0x57, limit: 180, &memos.longitude)
        // One mode character per constellation (GPS, GLONASS, Galileo, BeiDou, …).
        let modes = f.next()
        var first: UInt8?
        var anyFix = false
        for i in modes {
            let c = body[i]
            switch c {
            case 0x41, 0x44, 0x45, 0x46, 0x4D, 0x4E, 0x50, 0x52, 0x53:
                if first == nil { first = c }
                if c != 0x4E { anyFix = true }
            default: f.failed = true
            }
        }
        let satellites = f.integer()
        if let n = satellites, n > Position.maximumSatellites { f.failed = true }
        let hdop = f.decimal()
        let altitude = f.decimal()
        return .gns(.init(time: time, latitude: latitude, longitude: longitude, modeIndicator: first,
                          anyFix: anyFix, satellites: satellites, hdop: hdop, altitude: altitude))
    }

    private static func parseGLL(_ f: inout FieldReader, _ memos: inout FieldReader.Memos) -> NMEASentence {
        var s = NMEASentence.GLL()
        s.latitude = f.coordinate(positive: 0x4E, negative: 0x53, limit: 90, &memos.latitude)
        s.longitude = f.coordinate(positive: 0x45, negative: 0x57, limit: 180, &memos.longitude)
        s.time = f.timeOfDay(&memos.time)
        s.status = f.flag("AV")
        s.modeIndicator = f.flag("ADEFMNPRS")
        return .gll(s)
    }

    private static func parseGSA(_ f: inout FieldReader) -> NMEASentence {
        var s = NMEASentence.GSA()
        _ = f.flag("AM")
        s.mode = f.integer()
        if let m = s.mode, !(1...3).contains(m) { f.failed = true }
        f.skipIntegers(12)  // satellite ids in use
        s.pdop = f.decimal()
        s.hdop = f.decimal()
        s.vdop = f.decimal()
        return .gsa(s)
    }

    private static func parseGSV(_ f: inout FieldReader) -> NMEASentence {
        // Validate the numbers; a GSV contributes nothing to a position.
        f.skipIntegers(3)
        return .gsv
    }

    private static func parseVTG(_ f: inout FieldReader) -> NMEASentence {
        var s = NMEASentence.VTG()
        s.courseTrue = f.decimal()
        let second = f.character()
        if second == 0x54 || second == nil {  // `T`: NMEA 2.3+ layout with unit letters
            _ = f.decimal()  // magnetic course
            _ = f.flag("M")
            s.speedKnots = f.decimal()
            _ = f.flag("N")
            s.speedKmh = f.decimal()
            _ = f.flag("K")
            s.modeIndicator = f.flag("ADEFMNPRS")
        } else {
            // Old layout without unit letters: course, magnetic course, knots, km/h.
            s.speedKnots = f.decimal()
            s.speedKmh = f.decimal()
        }
        return .vtg(s)
    }

    private static func parseZDA(_ f: inout FieldReader, _ memos: inout FieldReader.Memos) -> NMEASentence {
        var s = NMEASentence.ZDA()
        s.time = f.timeOfDay(&memos.time)
        s.day = f.integer()
        s.month = f.integer()
        s.year = f.integer()
        if let d = s.day, !(1...31).contains(d) { f.failed = true }
        if let m = s.month, !(1...12).contains(m) { f.failed = true }
        if let y = s.year, !(1980...2200).contains(y) { f.failed = true }
        return .zda(s)
    }

    private static func parseGST(_ f: inout FieldReader, _ memos: inout FieldReader.Memos) -> NMEASentence {
        var s = NMEASentence.GST()
        s.time = f.timeOfDay(&memos.time)
        _ = f.decimal()  // RMS of pseudorange residuals
        _ = f.decimal()  // error ellipse semi-major
        _ = f.decimal()  // semi-minor
        _ = f.decimal()  // orientation
        s.latitudeError = f.decimal()
        s.longitudeError = f.decimal()
        s.altitudeError = f.decimal()
        return .gst(s)
    }
}
