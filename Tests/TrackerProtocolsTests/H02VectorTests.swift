import GatewayCore
import Testing
import TrackerProtocols

/// Every vector of `Fixtures/h02.txt`, each with its stated outcome.
@Suite struct H02VectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("h02")) ?? []

    /// Outcome per vector. H02 has no checksum, so no vector is rejected; the two `V1` sentences
    /// without a fix (V17 empty fields, V56 zero fields and hemisphere `0`) are `no_fix`.
    /// VP1 `A` (V20) is read as a position although the reference skipped it.
    static let expected: [String: VectorExpectation] = [
        "V1": .positions(1), "V2": .positions(1), "V4": .positions(1), "V5": .control("heartbeat"),
        "V7": .positions(1), "V8": .control("heartbeat"), "V10": .positions(1), "V11": .control("lbs"),
        "V13": .positions(1), "V14": .positions(1), "V16": .positions(1), "V17": .control("no_fix"),
        "V19": .positions(1), "V20": .positions(1), "V22": .control("lbs"), "V23": .positions(1),
        "V25": .control("heartbeat"), "V26": .control("lbs"), "V28": .positions(1), "V29": .positions(1),
        "V31": .positions(1), "V32": .positions(1), "V34": .positions(1), "V35": .control("lbs"),
        "V37": .positions(1), "V38": .control("lbs"), "V40": .control("lbs"), "V41": .positions(1),
        "V43": .control("lbs"), "V44": .control("lbs"), "V46": .control("heartbeat"), "V47": .control("lbs"),
        "V49": .positions(1), "V50": .positions(1), "V52": .positions(1), "V53": .positions(1),
        "V55": .positions(1), "V56": .control("no_fix"), "V58": .positions(1), "V59": .positions(1),
        "V61": .positions(1), "V62": .positions(1), "V64": .positions(1), "V65": .positions(1),
        "V67": .positions(1), "V68": .positions(1), "V70": .positions(1), "V71": .positions(1),
        "V73": .positions(1), "V74": .positions(1), "V76": .control("other"), "V77": .positions(1),
        "V79": .positions(1), "V80": .positions(1), "V82": .positions(1), "V83": .positions(1),
        "V85": .positions(1), "V86": .control("sms"), "V88": .positions(1), "V89": .positions(1),
    ]

    /// Where this codec reads a time the reference did not: V19 sentences carry their date in
    /// the standard place (`…,course,DDMMYY,,phone,ICCID,status`), which Traccar's pattern takes
    /// for a battery field; V49 has neither time nor date, so its position has no time.
    static let timesTheReferenceLeftToTheServer: [String: Timestamp?] = [
        "V19": Timestamp(year: 2017, month: 4, day: 20, hour: 21, minute: 44, second: 52),
        "V28": Timestamp(year: 2017, month: 2, day: 9, hour: 18, minute: 15, second: 19),
        "V34": Timestamp(year: 2017, month: 2, day: 10, hour: 10, minute: 37, second: 32),
        "V49": nil,
    ]

    static func vector(_ id: String) -> TrackerVector? { vectors.first { $0.id == id } }

    /// Decodes one vector; a binary report is followed by a `*` so that its length shows.
    static func decode(_ vector: TrackerVector, acknowledge: Bool = false) -> (CodecRunner<H02Codec>, [CodecEvent]) {
        var runner = CodecRunner(H02Codec(limits: limits, acknowledgePositions: acknowledge))
        let follower: [UInt8] = vector.isText ? [] : [UInt8(ascii: "*")]
        let events = runner.feed(vector.frame + follower)
        return (runner, events)
    }

    @Test func theFileHolds60VectorsAndEachHasAStatedOutcome() {
        let ids = Self.vectors.filter { $0.id.hasPrefix("V") }.map(\.id)
        #expect(ids.count == 60)
        #expect(Set(ids) == Set(Self.expected.keys))
    }

    /// The fixture's answer with its time placeholders filled from `now`.
    static func expectedAnswer(_ template: String?, now: Timestamp, acknowledge: Bool) -> [UInt8]? {
        guard var text = template else { return nil }
        let prefix = "none by default; with h02.ack=true: "
        if text.hasPrefix(prefix) {
            guard acknowledge else { return nil }
            text.removeFirst(prefix.count)
        }
        let c = now.components
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let long = "\(c.year)\(two(c.month))\(two(c.day))\(two(c.hour))\(two(c.minute))\(two(c.second))"
        let short = "\(two(c.hour))\(two(c.minute))\(two(c.second))"
        text = text.replacingOccurrences(of: "<yyyyMMddHHmmss UTC>", with: long)
            .replacingOccurrences(of: "<yyyyMMddHHmmss>", with: long)
            .replacingOccurrences(of: "<HHmmss UTC>", with: short)
        return Array(text.utf8)
    }

    @Test(arguments: expected.keys.sorted { $0.count == $1.count ? $0 < $1 : $0.count < $1.count })
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let expectation = try #require(Self.expected[id])
        let ref = try #require(vector.ref)
        for acknowledge in [false, true] {
            let (runner, events) = Self.decode(vector, acknowledge: acknowledge)
            #expect(runner.consumedWasSane)
            let answer = Self.expectedAnswer(vector.serverAnswer, now: runner.now, acknowledge: acknowledge)
            switch expectation {
            case .control(let kind):
                #expect(events.count == 1, "\(id): \(events)")
                let message = try #require(events.first?.message)
                #expect(message.controlKind == kind, "\(id): \(message)")
                #expect(message.answer == answer, "\(id): \(String(decoding: message.answer ?? [], as: UTF8.self))")
                if case .control(_, let deviceID, _) = message { #expect(deviceID == ref.id) }
            case .positions(let count):
                guard events.count == 1, let records = events.first?.message?.records else {
                    Issue.record("\(id): \(events)")
                    return
                }
                #expect(records.positions.count == count)
                #expect(records.answer == answer, "\(id): \(String(decoding: records.answer ?? [], as: UTF8.self))")
                if let fix = ref.ref, let position = records.positions.first { Self.check(position, fix, id) }
                #expect(records.deviceID == (vector.isText ? ref.id : vector.frame.dropFirst().prefix(5).map { hex([$0]) }.joined()))
            case .identification, .rejected, .controls:
                Issue.record("\(id): no such outcome for H02")
            }
        }
    }

    static func check(_ position: Position, _ fix: RefDecode.Fix, _ id: String) {
        if let time = timesTheReferenceLeftToTheServer[id] {
            #expect(position.time == time, "\(id): time \(String(describing: position.time))")
        } else {
            #expect(position.time == TrackerVectors.time(fix.time), "\(id): time \(String(describing: position.time))")
        }
        VectorCheck.near(position.latitude, fix.lat, 1e-5, "latitude", id)
        VectorCheck.near(position.longitude, fix.lon, 1e-5, "longitude", id)
        VectorCheck.near(position.speed, (fix.speedKnots ?? .nan) * 1852 / 3600, 1e-9, "speed", id)
        VectorCheck.near(position.course, fix.course ?? .nan, 0, "course", id)
        #expect(position.mode == (fix.valid ? .twoD : .noFix), "\(id): mode")
        if let status = fix.status {
            #expect(position.attributes["status"] == status.lowercased(), "\(id): status")
        }
    }

    @Test func vp1WithAFixIsAPositionWithoutATimeOfDay() throws {
        let (_, events) = Self.decode(try #require(Self.vector("V20")))
        let position = try #require(events.first?.message?.records?.positions.first)
        VectorCheck.near(position.latitude, -(27 + 2.7215 / 60), 1e-9, "latitude", "V20")
        VectorCheck.near(position.longitude, 152 + 51.9309 / 60, 1e-9, "longitude", "V20")
        #expect(position.time == nil)
        #expect(position.mode == .twoD)
    }

    @Test func framingVectorsGiveTheExpectedFirstFrame() throws {
        // Traccar's H02FrameDecoderTest streams. F9 starts with Traccar's 'X' marker, which this
        // codec does not frame (Traccar does not decode it either): its bytes are skipped as garbage.
        for stream in Self.vectors where stream.id.hasPrefix("F") {
            let expectedFrame = try #require(stream.expectedFrame)
            var runner = CodecRunner(H02Codec(limits: limits, acknowledgePositions: false))
            runner.feed(stream.frame + Array("*".utf8))
            let first = runner.events.first
            if stream.id == "F9" {
                #expect(runner.messages.isEmpty)
                continue
            }
            #expect(first?.message != nil, "\(stream.id): \(runner.events)")
            // The first message's frame: decoding just the expected bytes gives the same message.
            var alone = CodecRunner(H02Codec(limits: limits, acknowledgePositions: false))
            alone.feed(expectedFrame + Array("*".utf8))
            #expect(alone.messages.first == first?.message, "\(stream.id)")
        }
    }
}
