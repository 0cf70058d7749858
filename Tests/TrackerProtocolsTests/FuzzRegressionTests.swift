import GatewayCore
import Testing
import TrackerProtocols

/// Inputs on which a fuzz target (`make fuzz`, Fuzz/README.md) found a defect, kept so it stays
/// fixed. Each test names the target and the crash file; the input is the file without its first
/// byte (the target's read plan, Fuzz/Support/ChunkPlan.swift; `00` is one read).
@Suite struct FuzzRegressionTests {
    static let now = Timestamp(milliseconds: 1_749_988_800_000)

    /// Fuzz/TeltonikaUDP crash-b3258a9d: Traccar's UDP vector with the record's longitude set to
    /// 0x80000000. `abs(Int32.min)` does not fit an Int32: the range check of the coordinates
    /// trapped (TeltonikaCodec.readRecord) and took the process down with it.
    @Test func teltonikaUDPRecordWithLongitudeInt32MinIsAPositionWithoutCoordinates() {
        let datagram = TrackerVectors.bytes(hex: """
            0049cafe0122000f33353734353430373237313339373508010000015d3766f6a89680000000004c3eef0000\
            0000000000000704010029040000000002421c3818003201c7000000e10001
            """)
        var codec = TeltonikaCodec(transport: .udp, limits: TrackerLimits(maxFrameBytes: 16_384))
        let result = datagram.withUnsafeBytes { codec.decode($0, now: Self.now) }
        guard case .message(.records(let records), let consumed) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(consumed == datagram.count)
        #expect(records.deviceID == "357454072713975")
        #expect(records.positions.count == 1)
        #expect(records.positions.first?.hasCoordinates == false)
        #expect(records.positions.first?.mode == .noFix)
    }

    /// The same check on TCP, where the CRC vouches for the frame: a device that writes Int32.min
    /// (a common "no value" marker) into either coordinate gets its record without coordinates.
    @Test(arguments: [(Int32.min, Int32(0)), (Int32(0), Int32.min), (Int32.min, Int32.min), (Int32.max, Int32.max)])
    func teltonikaTCPRecordWithExtremeCoordinatesIsAPositionWithoutCoordinates(longitude: Int32, latitude: Int32) {
        let record = EncodedFrameTests.Record(
            milliseconds: 1_700_000_000_000, priority: 0, longitude: longitude, latitude: latitude,
            altitude: 0, angle: 0, satellites: 7, speed: 0, eventID: 0, io: [])
        let frame = EncodedFrameTests.tcpFrame(EncodedFrameTests.avlData(codec: 0x08, [record]))
        var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: TrackerLimits(maxFrameBytes: 16_384)))
        runner.feed(TeltonikaVectorTests.imeiFrame + frame)
        let positions = runner.events.compactMap { event -> [Position]? in
            if case .records(let records)? = event.message { return records.positions }
            return nil
        }
        #expect(runner.consumedWasSane)
        #expect(positions.count == 1)
        #expect(positions.first?.count == 1)
        #expect(positions.first?.first?.hasCoordinates == false)
        #expect(positions.first?.first?.mode == .noFix)
    }
}
