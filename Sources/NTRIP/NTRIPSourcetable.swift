/// An NTRIP caster's sourcetable: its data streams (`STR`), casters (`CAS`) and networks (`NET`),
/// as `GET /` returns it (NTRIP 1 and 2 alike, RTCM paper 10410.1 §2.2 / 10410.1 v2 Appendix).
///
/// Read leniently: casters leave fields out (RTKLIB's `str2str` writes `STR;MOUNT;identifier`),
/// write empty ones and add more; missing fields read as empty, numbers that do not parse as nil.
public struct NTRIPSourcetable: Sendable, Equatable {
    /// One `STR` record: a mountpoint.
    public struct Stream: Sendable, Equatable {
        public var mountpoint: String
        public var identifier: String
        /// `RTCM 3.2`, `RTCM 3`, `CMRx`, `RAW`…
        public var format: String
        /// Message types and rates, `1004(1),1005(10),1077(1)`.
        public var formatDetails: String
        /// 0 none, 1 L1, 2 L1+L2.
        public var carrier: Int?
        /// `GPS+GLO+GAL+BDS`.
        public var navSystem: String
        public var network: String
        /// ISO 3166 country code (three letters).
        public var country: String
        public var latitude: Double?
        public var longitude: Double?
        /// The caster wants the client's position as NMEA GGA (a virtual reference station, or
        /// the nearest base chosen from it).
        public var wantsNMEA: Bool
        /// 0 a single base, 1 a network solution.
        public var solution: Int?
        public var generator: String
        public var compression: String
        /// `N` none, `B` Basic, `D` Digest.
        public var authentication: String
        /// `Y` the stream costs money.
        public var fee: Bool
        public var bitrate: Int?
        /// Fields after the bitrate, joined by `;`.
        public var miscellaneous: String
    }

    public var streams: [Stream] = []
    /// `CAS` and `NET` records and anything else, as lines.
    public var otherRecords: [String] = []
    /// Whether the table ended with `ENDSOURCETABLE` (a table cut short does not).
    public var complete = false
    /// The text as the caster sent it.
    public var text = ""

    public init() {}

    /// Parses the table's text (lines ending in CRLF or LF; the response head already removed).
    public init(text: String) {
        self.text = text
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            if line.hasPrefix("ENDSOURCETABLE") { complete = true; break }
            let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
            guard fields.first == "STR", fields.count >= 2 else {
                if !line.isEmpty { otherRecords.append(String(line)) }
                continue
            }
            func f(_ i: Int) -> String { i < fields.count ? fields[i] : "" }
            streams.append(Stream(
                mountpoint: f(1), identifier: f(2), format: f(3), formatDetails: f(4), carrier: Int(f(5)),
                navSystem: f(6), network: f(7), country: f(8), latitude: Double(f(9)), longitude: Double(f(10)),
                wantsNMEA: f(11) == "1", solution: Int(f(12)), generator: f(13), compression: f(14),
                authentication: f(15), fee: f(16).uppercased() == "Y", bitrate: Int(f(17)),
                miscellaneous: fields.count > 18 ? fields[18...].joined(separator: ";") : ""))
        }
    }

    /// The stream of `mountpoint` (mountpoints are case-sensitive).
    public func stream(_ mountpoint: String) -> Stream? { streams.first { $0.mountpoint == mountpoint } }
}
