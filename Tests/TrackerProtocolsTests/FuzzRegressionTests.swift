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

    /// Fuzz/JT808 crash-a416bb3e: a frame with a bad check code whose closing 7E was the last byte
    /// of a read. How much of a bad frame to skip (through its closing mark, or up to it when the
    /// mark opens the next frame) was decided from whether the next byte had arrived, so one byte
    /// at a time and the whole stream gave different messages (the 0x0900 after it was lost when
    /// read whole). The skip now waits for the byte after the mark.
    @Test func jt808BadFrameEndingAReadIsSkippedAsWhenReadWhole() {
        let stream = TrackerVectors.bytes(hex: """
            7e020000ec6710704387730507000100009058000e015baf2c029bb43300127676767676767676767676767676767676\
            76000f00007d018b8e02d400020f720e0b00007d0131011ae11200755d3d0601cc0024990a7d01a0032301cc00249909\
            9b2941fc01cc002499099b29430b01cc0024990a7d01a0290601cc0024990a7d4252303a4130344d30385f56322e0b00\
            0000000000000e18ef3a6ae1c6be00bb2525007e0900001b41305888975883194000184754534c7c367c317c307c3130\
            3231383039347c317c0d0ab47e7389550327001051953711414c3330302d4c4100000f000000f916000f00000001007e\
            020000790136531852328201
            """)
        var whole = CodecRunner(JT808Codec(options: .init(limits: TrackerLimits(maxFrameBytes: 4_096), maxSplitBytes: 4_096, maxSplitMessages: 4)))
        whole.feed(stream)
        var bytewise = CodecRunner(JT808Codec(options: .init(limits: TrackerLimits(maxFrameBytes: 4_096), maxSplitBytes: 4_096, maxSplitMessages: 4)))
        bytewise.feed(stream, chunks: [1])
        #expect(firstDifference(bytewise.messages, whole.messages) == nil)
        #expect(whole.messages.contains { $0.controlKind == "0x0900" })
    }
}
