import GatewayCore
import Testing
import TrackerProtocols

/// Every vector of `Fixtures/teltonika.txt`, each with its stated outcome.
@Suite struct TeltonikaVectorTests {
    static let vectors: [TrackerVector] = (try? TrackerVectors.load("teltonika")) ?? []

    /// Outcome per vector. Codec 0x07 (GH3000) is not supported; the three frames whose data
    /// length runs past their bytes wait for more (TCP) and fail their CRC once the declared
    /// length has arrived; V23 and V50 carry a wrong CRC, V29 a data length of 0.
    static let expected: [String: VectorExpectation] = [
        "V1": .identification("123456789012345"),
        "V2": .positions(2), "V4": .positions(1), "V5": .positions(1), "V7": .positions(1),
        "V8": .positions(4), "V10": .positions(3), "V11": .positions(3), "V13": .positions(1),
        "V14": .positions(2), "V16": .control("command_response"), "V17": .control("command_response"),
        "V19": .positions(1), "V20": .positions(1), "V22": .positions(1), "V23": .rejected("checksum"),
        "V25": .positions(1), "V26": .positions(1), "V28": .positions(8), "V29": .rejected("length"),
        "V31": .control("command_response"), "V32": .rejected("unsupported"), "V34": .rejected("checksum"),
        "V35": .positions(6), "V37": .rejected("checksum"), "V38": .rejected("unsupported"),
        "V40": .control("command_response"), "V41": .rejected("checksum"), "V43": .positions(1),
        "V44": .control("keepalive"), "V46": .positions(11), "V47": .positions(11),
        "V49": .control("command_response"), "V50": .rejected("checksum"),
        "V52": .positions(1),
    ]

    static let imeiFrame = TrackerVectors.bytes(hex: "000F313233343536373839303132333435")

    static func vector(_ id: String) -> TrackerVector? { vectors.first { $0.id == id } }

    /// A TCP codec past its IMEI frame (AVL frames are only valid after it).
    static func identifiedRunner() -> CodecRunner<TeltonikaCodec> {
        var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
        runner.feed(imeiFrame)
        return runner
    }

    @Test func theFileHolds35VectorsAndEachHasAStatedOutcome() {
        let ids = Self.vectors.filter { $0.id.hasPrefix("V") }.map(\.id)
        #expect(ids.count == 35)
        #expect(Set(ids) == Set(Self.expected.keys))
    }

    @Test(arguments: expected.keys.sorted { $0.dropFirst().count == $1.dropFirst().count ? $0 < $1 : $0.count < $1.count })
    func vectorDecodesToItsStatedOutcome(id: String) throws {
        let vector = try #require(Self.vector(id))
        let expectation = try #require(Self.expected[id])
        let udp = id == "V52"
        var runner = udp ? CodecRunner(TeltonikaCodec(transport: .udp, limits: limits)) : Self.identifiedRunner()
        if id == "V1" { runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits)) }
        let events = runner.feed(vector.frame)

        switch expectation {
        case .identification(let imei):
            #expect(events == [.message(.identification(deviceID: imei, accepted: [0x01], refused: [0x00]))])
            #expect(vector.serverAnswer?.hasPrefix("01 (accept) / 00 (reject") == true)
        case .control(let kind):
            #expect(events.count == 1)
            #expect(events.first?.message?.controlKind == kind, "\(id): \(events)")
            // Command responses and keep-alives are not answered.
            #expect(events.first?.message?.answer == nil)
        case .positions(let count):
            guard events.count == 1, let records = events.first?.message?.records else {
                Issue.record("\(id): \(events)")
                return
            }
            #expect(records.positions.count == count)
            let ref = try #require(vector.ref)
            #expect(ref.records == count)
            if let first = ref.first, let position = records.positions.first { Self.check(position, first, id) }
            if let last = ref.last, let position = records.positions.last { Self.check(position, last, id) }
            if udp {
                // Traccar writes 0000 for the packet id; the device's specification (and this codec)
                // echoes it: the fixture's bytes with the frame's packet id in place.
                var fixture = try #require(vector.serverAnswerBytes)
                #expect(fixture == [0x00, 0x05, 0x00, 0x00, 0x01, 0x22, 0x01])
                fixture[2] = vector.frame[2]
                fixture[3] = vector.frame[3]
                #expect(records.answer == fixture)
                #expect(records.deviceID == ref.imei)
            } else {
                #expect(records.answer == vector.serverAnswerBytes, "\(id): \(hex(records.answer))")
                #expect(records.deviceID == nil)
            }
        case .controls:
            Issue.record("\(id): no such outcome for Teltonika")
        case .rejected(let reason):
            // The frame alone never gives a message; with the bytes its length claims it is rejected.
            #expect(events.allSatisfy { $0.message == nil })
            var padded = Self.identifiedRunner()
            let padding = [UInt8](repeating: 0, count: 256)
            let paddedEvents = padded.feed(vector.frame + padding)
            VectorCheck.rejected(paddedEvents, reason: reason, id)
            #expect(paddedEvents.first?.closes == true, "Teltonika cannot resynchronise: an invalid frame closes")
            let marked = try #require(vector.ref)
            #expect(!marked.isIntact || reason == "unsupported", "\(id) is marked intact but rejected")
        }
    }

    static func check(_ position: Position, _ record: RefDecode.Record, _ id: String) {
        #expect(position.time == TrackerVectors.time(record.time), "\(id): time \(String(describing: position.time))")
        VectorCheck.near(position.latitude, record.lat, 1e-7, "latitude", id)
        VectorCheck.near(position.longitude, record.lon, 1e-7, "longitude", id)
        VectorCheck.near(position.altitude, Double(record.alt), 0, "altitude", id)
        VectorCheck.near(position.course, Double(record.angle), 0, "course", id)
        VectorCheck.near(position.speed, Double(record.speedKmh) / 3.6, 1e-9, "speed", id)
        #expect(position.satellites == record.sats)
        #expect(position.mode == (record.valid ? .threeD : .noFix))
        #expect(position.attributes["priority"] == String(record.priority))
        #expect(position.attributes["event_io"] == (record.eventIo == 0 ? nil : String(record.eventIo)))
    }

    @Test func imeiFrameIsRejectedOnceIdentifiedAndAVLDataBeforeIt() {
        var fresh = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
        let avl = Self.vector("V19")?.frame ?? []
        #expect(fresh.feed(avl).first == .invalid(reason: "length", close: true))

        var identified = Self.identifiedRunner()
        #expect(identified.feed(Self.imeiFrame).first == .invalid(reason: "syntax", close: true))
    }

    @Test func keepAliveByteBeforeTheIMEIFrameIsItsOwnFrame() throws {
        // Traccar's TeltonikaFrameDecoderTest: FF, then the IMEI frame.
        let stream = try #require(Self.vectors.first { $0.id == "F1" })
        var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
        let events = runner.feed(stream.frame)
        #expect(events == [
            .message(.control(kind: "keepalive", deviceID: nil, answer: nil)),
            .message(.identification(deviceID: "123456789012345", accepted: [1], refused: [0])),
        ])
        #expect(stream.expectedFrame == [0xFF])
    }

    @Test func namedIOElementsBecomeAttributes() throws {
        // V19 (Codec 8) IO: 240=1 21=3 200=0 1=1 29=0 252=0 | 66=14233 24=83 205 206 67=3976 25 86 |
        // 241 16=2656224. V43: 239=1 240=1 80=1 21=5 200=0 69=1 | 181=11 182=6 66=14363 24=94 ... 68=0.
        var runner = Self.identifiedRunner()
        let v19 = try #require(runner.feed(Self.vector("V19")?.frame ?? []).first?.message?.records?.positions.first)
        #expect(v19.attributes["movement"] == "true")
        #expect(v19.attributes["gsm_signal"] == "3")
        #expect(v19.attributes["sleep_mode"] == "0")
        #expect(v19.attributes["din1"] == "true")
        #expect(v19.attributes["io.29"] == "0")
        #expect(v19.attributes["io.252"] == "0")
        #expect(v19.attributes["external_voltage"] == "14.233")
        #expect(v19.attributes["io_speed"] == "83")
        #expect(v19.attributes["battery_voltage"] == "3.976")
        #expect(v19.attributes["io.205"] == String(0xF80D))
        #expect(v19.attributes["odometer"] == "2656224")
        #expect(v19.attributes["io.241"] == String(0x5AA1))
        #expect(v19.pdop == nil)

        let v43 = try #require(runner.feed(Self.vector("V43")?.frame ?? []).first?.message?.records?.positions.first)
        #expect(v43.attributes["ignition"] == "true")
        #expect(v43.attributes["gnss_status"] == "1")
        #expect(v43.attributes["io.80"] == "1")
        #expect(v43.attributes["battery_current"] == "0.000")
        #expect(v43.attributes["external_voltage"] == "14.363")
        #expect(v43.pdop == 1.1)
        #expect(v43.hdop == 0.6)
        #expect(v43.attributes["io.181"] == nil)
    }

    @Test func variableLengthElementsOfCodec8ExtendedAreHex() throws {
        // V14: no fixed-width elements, one NX element: id 0x0181, 23 bytes.
        var runner = Self.identifiedRunner()
        let p = try #require(runner.feed(Self.vector("V14")?.frame ?? []).first?.message?.records?.positions.first)
        #expect(p.attributes["io.385"] == "11210102030405060708090a0b0c0d0e0f10020b010ad0")
        #expect(p.attributes["event_io"] == "385")
    }
}
