import Foundation
import GatewayCore
import Testing
@testable import TrackerProtocols

/// Every vector of `Fixtures/jt808.txt`, each with its stated outcome, positions checked against
/// the independent decoder's values and answers byte for byte (the file's rule: the server's
/// serial is 0 on the first message it sends on a connection).
@Suite struct JT808VectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("jt808")) ?? []

    /// Outcome per vector. Positions: every location message (0x0200, 0x0704, vendor 0x0210
    /// batch). Admissions: the registrations V5 (2019) and V86, the authentication V87. Controls:
    /// messages without a location, answered 0x8001 at once. Rejected: the four frames marked
    /// with a wrong check code or body length (V34, V88, V109, V112); Jointech's vendor
    /// 0x5501/0x5502 (V35, V67, V70, V71), whose header has a 1-byte serial, so the body length
    /// of a JT/T 808 header does not hold; and Jointech's `(…)` text (V53), not JT/T 808.
    static let expected: [String: VectorExpectation] = {
        var table: [String: VectorExpectation] = [:]
        for id in ["V7", "V10", "V12", "V15", "V16", "V19", "V21", "V22", "V25", "V28", "V29", "V32", "V36", "V41", "V42",
                   "V43", "V44", "V47", "V48", "V50", "V51", "V54", "V57", "V59", "V63", "V64", "V65", "V72", "V74", "V75",
                   "V77", "V79", "V81", "V82", "V83", "V92", "V95", "V96", "V98", "V99", "V103", "V104", "V105", "V107", "V108",
                   "V1", "V6"] {
            table[id] = .positions(1)
        }
        table["V13"] = .positions(6)
        table["V49"] = .positions(8)
        table["V66"] = .positions(3)
        table["V80"] = .positions(4)
        table["V97"] = .positions(3)
        for (id, kind) in [("V8", "0x0702"), ("V20", "0x0900"), ("V23", "0x0900"), ("V24", "0x6006"), ("V40", "0x0900"),
                           ("V46", "0x0900"), ("V55", "0x0900"), ("V69", "0x1300"), ("V93", "0x0002"), ("V100", "0x0210"),
                           ("V101", "0x0107"), ("V102", "0x1007")] {
            table[id] = .control(kind)
        }
        for id in ["V5", "V86", "V87"] { table[id] = .identification("admission") }
        for id in ["V34", "V88", "V109"] { table[id] = .rejected("checksum") }
        for id in ["V35", "V67", "V70", "V71", "V112"] { table[id] = .rejected("length") }
        table["V53"] = .rejected("syntax")
        return table
    }()

    static func vector(_ id: String) -> TrackerVector? { vectors.first { $0.id == id } }

    static func codec() -> JT808Codec { JT808Codec(options: .init(limits: limits)) }

    static func messages(_ id: String) -> [TrackerMessage] {
        var runner = CodecRunner(codec())
        return runner.feed(vector(id)?.frame ?? []).compactMap(\.message)
    }

    static func positions(_ id: String) -> [Position] { messages(id).first?.records?.positions ?? [] }

    static func ref(_ id: String) throws -> JT808Ref {
        try JSONDecoder().decode(JT808Ref.self, from: Data(try #require(vector(id)?.refJSON).utf8))
    }

    @Test func theFileHolds76VectorsAndEachHasAStatedOutcome() {
        let ids = Self.vectors.filter { $0.id.hasPrefix("V") }.map(\.id)
        #expect(ids.count == 76)
        #expect(Set(ids) == Set(Self.expected.keys))
    }

    @Test(arguments: expected.keys.sorted { $0.count == $1.count ? $0 < $1 : $0.count < $1.count })
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let expectation = try #require(Self.expected[id])
        var runner = CodecRunner(Self.codec())
        let events = runner.feed(vector.frame)
        #expect(runner.consumedWasSane)
        var wire = Self.codec()
        let fixtureAnswer = vector.serverAnswerBytes
        switch expectation {
        case .positions(let count):
            let records = try #require(events.first?.message?.records, "\(id): \(events)")
            #expect(events.count == 1)
            #expect(records.positions.count == count)
            #expect(records.answer.map { wire.outgoing($0) } == fixtureAnswer, "\(id): \(hex(records.answer.map { wire.outgoing($0) }))")
            let ref = try Self.ref(id)
            #expect(records.deviceID == ref.deviceID, "\(id): device \(records.deviceID ?? "-")")
            let fixes = ref.positions ?? ref.position.map { [$0] } ?? []
            #expect(fixes.count == count)
            for (position, fix) in zip(records.positions, fixes) { Self.check(position, fix, id, batchType: ref.batchType) }
        case .control(let kind):
            let message = try #require(events.first?.message, "\(id): \(events)")
            #expect(events.count == 1)
            #expect(message.controlKind == kind)
            #expect(message.answer.map { wire.outgoing($0) } == fixtureAnswer, "\(id): \(hex(message.answer.map { wire.outgoing($0) }))")
        case .identification:
            guard case .admission(let admission)? = events.first?.message else {
                Issue.record("\(id): \(events)")
                return
            }
            #expect(admission.deviceID == (try Self.ref(id)).deviceID)
            // The file's answers give the code Traccar issues: the phone digits (auth "phone").
            let verdict: TrackerAdmissionVerdict = switch admission.request {
            case .register: .registered(code: try #require(JT808Codec.phoneCode(admission)))
            default: .authenticated
            }
            #expect(wire.codecAnswer(admission, verdict) == fixtureAnswer, "\(id): \(hex(wire.codecAnswer(admission, verdict)))")
        case .rejected(let reason):
            // A bad frame is skipped once the next byte shows where the next frame starts.
            var followed = CodecRunner(Self.codec())
            let after = followed.feed(vector.frame + [0x7E, 0x00, 0x02, 0x00, 0x00, 0x01, 0x39, 0x12, 0x34, 0x56, 0x78, 0x00, 0x01, 0x33, 0x7E])
            #expect(events.allSatisfy { $0.message == nil })
            VectorCheck.rejected(after, reason: reason, id)
            #expect(after.compactMap(\.message).map(\.controlKind) == ["0x0002"], "\(id): the frame after it is read")
            #expect(vector.serverAnswerBytes == nil || ["V35", "V70"].contains(id), "\(id) is rejected but the file owes it an answer")
        case .controls:
            Issue.record("no vector is several frames")
        }
    }

    /// A position against the reference's fix: time in UTC (the frame's GMT+8 less 8 hours),
    /// coordinates within 1e-6°, speed, course, altitude, satellites, ignition, fix mode, alarms
    /// and the additional items, standard ones by name and the rest as `jt808.<id>` hex.
    static func check(_ position: Position, _ fix: JT808Ref.Fix, _ id: String, batchType: String?) {
        #expect(position.time == TrackerVectors.time(fix.time), "\(id): time \(String(describing: position.time))")
        if position.mode != .noFix || fix.lat != 0 || fix.lon != 0 {
            VectorCheck.near(position.latitude, fix.lat, 1e-6, "latitude", id)
            VectorCheck.near(position.longitude, fix.lon, 1e-6, "longitude", id)
        }
        VectorCheck.near(position.speed, fix.speedKmh / 3.6, 1e-9, "speed", id)
        VectorCheck.near(position.course, Double(fix.course), 0, "course", id)
        VectorCheck.near(position.altitude, Double(fix.altitudeM), 0, "altitude", id)
        #expect(position.mode == (fix.valid ? .threeD : .noFix), "\(id): mode")
        #expect(position.attributes["ignition"] == String(fix.statusBits.contains("acc")), "\(id): ignition")
        #expect(position.attributes["status"] == fix.status, "\(id): status")
        let alarms = fix.alarmBits.map { Self.alarmName[$0] ?? $0.replacingOccurrences(of: "bit", with: "alarm_bit") }
        #expect(position.attributes["alarm"] == (alarms.isEmpty ? nil : alarms.joined(separator: ",")), "\(id): alarm")
        let systems = ["gps", "beidou", "glonass", "galileo"].filter(fix.statusBits.contains)
        #expect(position.attributes["gnss"] == (systems.isEmpty ? nil : systems.joined(separator: ",")), "\(id): gnss")
        #expect((position.attributes["late"] == "true") == (batchType?.hasPrefix("1") == true), "\(id): late")
        var satellites: Int?
        for item in fix.items ?? [] {
            switch item.id {
            case "0x31" where item.len == 1: satellites = item.satellites
            case "0x01" where item.len == 4:
                #expect(position.attributes["odometer"] == String(Int(((item.odometerKm ?? -1) * 1000).rounded())), "\(id): odometer")
            case "0x30" where item.len == 1: #expect(position.attributes["rssi"] == item.rssi.map(String.init), "\(id): rssi")
            case "0x25" where item.len == 4: #expect(position.attributes["vehicle_signals"] == item.hex, "\(id): 0x25")
            case "0x2A" where item.len == 2: #expect(position.attributes["io_status"] == item.hex, "\(id): 0x2A")
            case "0x02", "0x03", "0x04", "0x11", "0x12", "0x13", "0x2B":
                break
            default:
                let key = "jt808." + item.id.dropFirst(2).lowercased()
                #expect(position.attributes[key] == item.hex, "\(id): \(key)")
            }
        }
        #expect(position.satellites == satellites, "\(id): satellites")
    }

    /// The reference's alarm names and ours.
    static let alarmName = [
        "main-power-off": "power_cut", "main-power-low": "power_low", "fatigue": "fatigue_driving",
        "driving-overtime-today": "driving_overtime_today", "camera-fault": "camera_fault",
    ]

    // MARK: - Beyond the table

    @Test func framingVectorsGiveTheExpectedFrame() throws {
        // F2 and F3: an escaped stream (after two bytes of noise in F3) unescapes to the
        // expected frame; F1 is Jointech's text form, which this source does not read.
        for id in ["F2", "F3"] {
            let vector = try #require(Self.vector(id))
            let expected = try #require(vector.expectedFrame)
            var stream = vector.frame
            var scans: [JT808Wire.Scan] = []
            while !stream.isEmpty {
                let scan = stream.withUnsafeBytes { JT808Wire.scan($0, maxFrameBytes: 4096) }
                scans.append(scan)
                switch scan {
                case .frame(_, let n), .invalid(_, let n): stream.removeFirst(max(1, n))
                case .needMore: stream = []
                }
            }
            guard case .frame(let unescaped, _)? = scans.last else {
                Issue.record("\(id): \(scans)")
                return
            }
            #expect([0x7E] + unescaped + [0x7E] == expected)
        }
    }

    @Test func theDeviceTimeZoneIsAnOption() throws {
        // V7 says 2025-11-18 11:26:11 in the terminal's zone: GMT+8 by default, UTC when told.
        var utc = CodecRunner(JT808Codec(options: .init(limits: limits, timeZoneOffsetSeconds: 0)))
        let position = try #require(utc.feed(Self.vector("V7")?.frame ?? []).first?.message?.records?.positions.first)
        #expect(position.time == Timestamp(year: 2025, month: 11, day: 18, hour: 11, minute: 26, second: 11))
        #expect(Self.positions("V7").first?.time == Timestamp(year: 2025, month: 11, day: 18, hour: 3, minute: 26, second: 11))
    }

    @Test func aGCJ02TerminalsPositionsSayTheirDatum() throws {
        var runner = CodecRunner(JT808Codec(options: .init(limits: limits, datum: .gcj02)))
        let position = try #require(runner.feed(Self.vector("V7")?.frame ?? []).first?.message?.records?.positions.first)
        #expect(position.datum == .gcj02)
        #expect(Self.positions("V7").first?.datum == .wgs84)
    }

    @Test func theTerminalNumberDropsLeadingZerosAndABinaryFieldIsAnIMEI() throws {
        #expect(Self.messages("V1").first?.records?.deviceID == "14450376202")
        // 2019: BCD[10] 00000866496077582164.
        #expect(Self.messages("V6").first?.records?.deviceID == "866496077582164")
        // V13's phone field 4eb6fb4afd9e is not BCD: 48 bits = 86547807010206, Luhn digit 8.
        #expect(Self.messages("V13").first?.records?.deviceID == "865478070102068")
    }

    @Test func statusBitsAndStandardItemsAreNamed() throws {
        // V7: status 022c004e: positioned, south, west, bit 6, GPS, BeiDou, Galileo, bit 25.
        let v7 = try #require(Self.positions("V7").first)
        #expect(v7.attributes["gnss"] == "gps,beidou,galileo")
        #expect(v7.attributes["ignition"] == "false")
        #expect(v7.latitude.map { $0 < 0 } == true && v7.longitude.map { $0 < 0 } == true)
        // V1: 0x0704 of one location stored while out of coverage: late, and its alarms named.
        let v1 = try #require(Self.positions("V1").first)
        #expect(v1.attributes["late"] == "true")
        #expect(v1.attributes["alarm"] == "power_cut,driving_overtime_today")
        #expect(v1.attributes["odometer"] == "1402500")
        // Door and oil/circuit bits: find a vector whose reference lists them.
        for vector in Self.vectors {
            guard let json = vector.refJSON, json.contains("\"oil-cut\""), let position = Self.positions(vector.id).first else { continue }
            #expect(position.attributes["oil_cut"] == "true", "\(vector.id)")
            #expect(position.attributes["circuit_cut"] == (json.contains("\"circuit-cut\"") ? "true" : nil), "\(vector.id)")
        }
    }
}

/// The JT/T 808 reference decode (`ref-decode` of `jt808.txt`).
struct JT808Ref: Decodable {
    var phone: String?
    var phoneIsBCD: Bool?
    var imeiFromBinary: String?
    var batchType: String?
    var position: Fix?
    var positions: [Fix]?

    struct Fix: Decodable {
        var time: String
        var valid: Bool
        var lat: Double
        var lon: Double
        var altitudeM: Int
        var speedKmh: Double
        var course: Int
        var status: String
        var alarmBits: [String]
        var statusBits: [String]
        var items: [Item]?
    }

    struct Item: Decodable {
        var id: String
        var len: Int
        var hex: String
        var satellites: Int?
        var odometerKm: Double?
        var rssi: Int?
    }

    /// The terminal number the source gives: the phone digits without leading zeros, or the IMEI.
    var deviceID: String? {
        if phoneIsBCD == false { return imeiFromBinary }
        guard let phone else { return nil }
        let trimmed = phone.drop { $0 == "0" }
        return trimmed.isEmpty ? "0" : String(trimmed)
    }
}

extension JT808Codec {
    /// The bytes that go out for an admission's answer, numbered.
    mutating func codecAnswer(_ admission: TrackerAdmission, _ verdict: TrackerAdmissionVerdict) -> [UInt8]? {
        answer(admission, verdict).map { outgoing($0) }
    }
}
