import GatewayCore

/// Counters of what an ``NMEADecoder`` saw, for logs and metrics; a receiver stream decoder
/// (NMEA with UBX and RTCM 3 frames between the sentences) adds its binary frames.
public struct NMEAStatistics: Sendable, Equatable, CustomStringConvertible {
    /// Input bytes consumed.
    public var bytes = 0
    /// Sentences that passed every check and were used.
    public var accepted = 0
    /// Checksum present but wrong or malformed.
    public var badChecksum = 0
    /// No `*HH` checksum while ``NMEAOptions/requireChecksum`` is on.
    public var missingChecksum = 0
    /// A non-printable or reserved byte inside the body.
    public var invalidCharacter = 0
    /// Lines longer than ``NMEAOptions/maxSentenceLength``.
    public var tooLong = 0
    /// Sentences cut off by the start of another one.
    public var truncated = 0
    /// Known sentences with a field that does not parse.
    public var badField = 0
    /// Bytes outside any sentence or comment (binary noise, NULs, garbage lines).
    public var noiseBytes = 0
    /// Well-formed sentences of a type this decoder does not use.
    public var unknown = 0
    /// Well-formed proprietary `$P…` sentences.
    public var proprietary = 0
    /// AIS `!…` sentences, framed and ignored.
    public var ais = 0
    /// `#` comment lines.
    public var comments = 0
    /// Positions emitted (one per receiver epoch).
    public var epochs = 0
    /// UBX frames with a good checksum, of any class.
    public var ubxFrames = 0
    /// UBX frames whose checksum failed (skipped; the scan resumed one byte after their sync).
    public var ubxBadChecksum = 0
    /// UBX headers stating a payload longer than the decoder accepts (a false sync).
    public var ubxTooLong = 0
    /// Binary frames (UBX or RTCM) cut off by the end of the input.
    public var binaryTruncated = 0
    /// RTCM 3 frames with a good CRC-24Q.
    public var rtcmFrames = 0
    /// RTCM 3 frames whose CRC-24Q failed.
    public var rtcmBadCRC = 0
    /// NMEA epochs dropped because a UBX NAV-PVT described the same epoch.
    public var superseded = 0

    /// Sentences that passed the checksum, used or not: evidence the receiver is talking at the right rate.
    public var wellFormed: Int { accepted + unknown + proprietary + ais + badField + ubxFrames + rtcmFrames }

    /// Creates zeroed counters.
    public init() {}

    /// Sentences rejected for any reason (noise bytes are not sentences and are not included).
    public var rejected: Int {
        badChecksum + missingChecksum + invalidCharacter + tooLong + truncated + badField
    }

    /// One compact line for logs, such as `bytes=1200 accepted=20 rejected=1 (checksum=1) epochs=5`.
    public var description: String {
        var s = "bytes=\(bytes) accepted=\(accepted) rejected=\(rejected)"
        let reasons: [(String, Int)] = [
            ("checksum", badChecksum), ("missing_checksum", missingChecksum),
            ("invalid_char", invalidCharacter), ("too_long", tooLong),
            ("truncated", truncated), ("bad_field", badField),
        ]
        let nonZero = reasons.filter { $0.1 != 0 }
        if !nonZero.isEmpty {
            s += " (" + nonZero.map { "\($0.0)=\($0.1)" }.joined(separator: " ") + ")"
        }
        s += " unknown=\(unknown) proprietary=\(proprietary) ais=\(ais) comments=\(comments)"
        s += " noise_bytes=\(noiseBytes) epochs=\(epochs)"
        // Binary counters only when the stream had binary frames: an NMEA log's line stays as it was.
        let binary: [(String, Int)] = [
            ("ubx", ubxFrames), ("ubx_bad_checksum", ubxBadChecksum), ("ubx_too_long", ubxTooLong),
            ("rtcm", rtcmFrames), ("rtcm_bad_crc", rtcmBadCRC), ("binary_truncated", binaryTruncated),
            ("superseded", superseded),
        ]
        for (name, value) in binary where value != 0 { s += " \(name)=\(value)" }
        return s
    }
}

extension NMEAStatistics {
    /// Copies the counters into a component's stats (as `nmea.*` values), for the stats line.
    public func publish(to stats: ComponentStats) {
        stats.set("nmea.accepted", accepted, kind: .counter)
        stats.set("nmea.rejected", rejected, kind: .counter)
        for (name, value) in [
            ("nmea.bad_checksum", badChecksum), ("nmea.missing_checksum", missingChecksum),
            ("nmea.invalid_char", invalidCharacter), ("nmea.too_long", tooLong), ("nmea.truncated", truncated),
            ("nmea.bad_field", badField), ("nmea.noise_bytes", noiseBytes), ("nmea.unknown", unknown),
            ("ubx.frames", ubxFrames), ("ubx.bad_checksum", ubxBadChecksum), ("ubx.too_long", ubxTooLong),
            ("rtcm.frames", rtcmFrames), ("rtcm.bad_crc", rtcmBadCRC), ("stream.binary_truncated", binaryTruncated),
            ("nmea.superseded", superseded),
        ] where value > 0 {
            stats.set(name, value, kind: .counter)
        }
    }

    /// The counters of two decoders added up: a source keeps one decoder per connection (or run,
    /// or sender) and publishes the total, so its `nmea.*` values never go back on a reconnect.
    public func adding(_ o: NMEAStatistics) -> NMEAStatistics { combined(o, +) }

    /// The counters of `self` less `o`: what a decoder counted since `o` was read from it.
    public func subtracting(_ o: NMEAStatistics) -> NMEAStatistics { combined(o, -) }

    private func combined(_ o: NMEAStatistics, _ op: (Int, Int) -> Int) -> NMEAStatistics {
        var s = self
        s.bytes = op(s.bytes, o.bytes); s.accepted = op(s.accepted, o.accepted); s.badChecksum = op(s.badChecksum, o.badChecksum)
        s.missingChecksum = op(s.missingChecksum, o.missingChecksum); s.invalidCharacter = op(s.invalidCharacter, o.invalidCharacter)
        s.tooLong = op(s.tooLong, o.tooLong); s.truncated = op(s.truncated, o.truncated); s.badField = op(s.badField, o.badField)
        s.noiseBytes = op(s.noiseBytes, o.noiseBytes); s.unknown = op(s.unknown, o.unknown); s.proprietary = op(s.proprietary, o.proprietary)
        s.ais = op(s.ais, o.ais); s.comments = op(s.comments, o.comments); s.epochs = op(s.epochs, o.epochs)
        s.ubxFrames = op(s.ubxFrames, o.ubxFrames); s.ubxBadChecksum = op(s.ubxBadChecksum, o.ubxBadChecksum)
        s.ubxTooLong = op(s.ubxTooLong, o.ubxTooLong); s.binaryTruncated = op(s.binaryTruncated, o.binaryTruncated)
        s.rtcmFrames = op(s.rtcmFrames, o.rtcmFrames); s.rtcmBadCRC = op(s.rtcmBadCRC, o.rtcmBadCRC)
        s.superseded = op(s.superseded, o.superseded)
        return s
    }
}
