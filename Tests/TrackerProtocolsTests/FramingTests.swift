import GatewayCore
import GatewayTesting
import Testing
import TrackerProtocols

/// The codecs as framers: the same messages however the stream is cut, garbage and truncated
/// frames skipped, absurd length fields rejected at once, and no input that traps.
@Suite struct FramingTests {
    // MARK: - Streams of every valid vector

    /// Teltonika over TCP: the IMEI frame, a keep-alive, then every AVL frame that decodes.
    static var teltonikaStream: [UInt8] {
        var bytes = TeltonikaVectorTests.imeiFrame + [0xFF]
        for vector in TeltonikaVectorTests.vectors where vector.id != "V1" && vector.id != "V52" {
            switch TeltonikaVectorTests.expected[vector.id] {
            case .positions, .control: bytes += vector.frame
            default: break
            }
        }
        return bytes
    }

    /// GT06: every vector that is not rejected, in file order.
    static var gt06Stream: [UInt8] {
        GT06VectorTests.vectors.filter { vector in
            guard let expected = GT06VectorTests.expected[vector.id] else { return false }
            if case .rejected = expected { return false }
            return true
        }.flatMap(\.frame)
    }

    /// H02: every text vector with CR LF after it, and the binary reports of one length between
    /// them (a connection's reports all have one length: it is learned from the first).
    static func h02Stream(binaryLength: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        for vector in H02VectorTests.vectors where vector.id.hasPrefix("V") {
            if vector.isText {
                bytes += vector.frame + [0x0D, 0x0A]
            } else if vector.frame.count == binaryLength {
                bytes += vector.frame
            }
        }
        return bytes
    }

    static func run<Codec: TrackerCodec>(_ make: () -> Codec, _ bytes: [UInt8], chunks: [Int]? = nil) -> CodecRunner<Codec> {
        var runner = CodecRunner(make())
        if let chunks { runner.feed(bytes, chunks: chunks) } else { runner.feed(bytes) }
        return runner
    }

    @Test(arguments: ["teltonika", "gt06", "h02-45", "h02-32"])
    func aStreamCutAnyWayGivesTheSameMessagesAsWhole(protocolName: String) {
        switch protocolName {
        case "teltonika":
            Self.checkChunkings({ TeltonikaCodec(transport: .tcp, limits: limits) }, Self.teltonikaStream, minimum: 25)
        case "gt06":
            Self.checkChunkings({ GT06Codec(limits: limits) }, Self.gt06Stream, minimum: 100)
        case "h02-45":
            Self.checkChunkings({ H02Codec(limits: limits, acknowledgePositions: true) }, Self.h02Stream(binaryLength: 45), minimum: 50)
        default:
            Self.checkChunkings({ H02Codec(limits: limits, acknowledgePositions: false) }, Self.h02Stream(binaryLength: 32), minimum: 50)
        }
    }

    static func checkChunkings<Codec: TrackerCodec>(_ make: () -> Codec, _ bytes: [UInt8], minimum: Int,
                                                    sourceLocation: SourceLocation = #_sourceLocation) {
        let whole = run(make, bytes)
        #expect(whole.messages.count >= minimum, sourceLocation: sourceLocation)
        #expect(whole.events.allSatisfy { $0.message != nil }, "a stream of valid frames has no invalid span",
                sourceLocation: sourceLocation)
        #expect(whole.consumedWasSane, sourceLocation: sourceLocation)
        let single = run(make, bytes, chunks: [1])
        #expect(firstDifference(single.messages, whole.messages) == nil, "one byte at a time", sourceLocation: sourceLocation)
        #expect(single.events.count == whole.events.count, sourceLocation: sourceLocation)
        var rng = SeededGenerator(seed: 0x7E1E)
        for round in 0..<5 {
            let sizes = (0..<300).map { _ in Int.random(in: 1...(round == 0 ? 7 : 200), using: &rng) }
            let chunked = run(make, bytes, chunks: sizes)
            #expect(firstDifference(chunked.messages, whole.messages) == nil, "random chunks, round \(round)",
                    sourceLocation: sourceLocation)
            #expect(chunked.consumedWasSane, sourceLocation: sourceLocation)
        }
    }

    // MARK: - Garbage and truncated frames

    /// Seeded garbage without any byte in `excluded` (so it cannot contain a frame start).
    static func garbage(_ count: Int, excluding excluded: Set<UInt8>, _ rng: inout SeededGenerator) -> [UInt8] {
        var out: [UInt8] = []
        while out.count < count {
            let byte = UInt8.random(in: 0...255, using: &rng)
            if !excluded.contains(byte) { out.append(byte) }
        }
        return out
    }

    @Test func gt06SkipsGarbageAndTruncatedFramesBetweenValidOnes() {
        let frames = GT06VectorTests.vectors.filter {
            if case .positions = GT06VectorTests.expected[$0.id] { return true }
            return false
        }.map(\.frame)
        var rng = SeededGenerator(seed: 6)
        var stream: [UInt8] = []
        for (index, frame) in frames.enumerated() {
            stream += Self.garbage(Int.random(in: 1...40, using: &rng), excluding: [0x78, 0x79], &rng)
            if index % 3 == 0 { stream += frame.prefix(frame.count / 2) }  // a frame cut short
            stream += frame
        }
        stream += Self.garbage(17, excluding: [0x78, 0x79], &rng)
        let clean = Self.run({ GT06Codec(limits: limits) }, frames.flatMap { $0 })
        for chunks in [nil, [1], [5, 300, 2, 64]] as [[Int]?] {
            let dirty = Self.run({ GT06Codec(limits: limits) }, stream, chunks: chunks)
            #expect(firstDifference(dirty.messages, clean.messages) == nil)
            #expect(dirty.events.contains { !$0.closes && $0.message == nil })
            #expect(dirty.consumedWasSane)
        }
    }

    @Test func h02SkipsGarbageAndTruncatedSentencesBetweenValidOnes() {
        let frames = H02VectorTests.vectors.filter { $0.isText }.map(\.frame)
        var rng = SeededGenerator(seed: 2)
        let excluded: Set<UInt8> = [0x2A, 0x24, 0x23, 0x0D, 0x0A]
        var stream: [UInt8] = []
        for (index, frame) in frames.enumerated() {
            stream += Self.garbage(Int.random(in: 1...40, using: &rng), excluding: excluded, &rng)
            if index % 3 == 0 { stream += frame.prefix(frame.count / 2) }
            stream += frame
        }
        let clean = Self.run({ H02Codec(limits: limits, acknowledgePositions: false) }, frames.flatMap { $0 })
        for chunks in [nil, [1], [3, 250, 9]] as [[Int]?] {
            let dirty = Self.run({ H02Codec(limits: limits, acknowledgePositions: false) }, stream, chunks: chunks)
            #expect(firstDifference(dirty.messages, clean.messages) == nil)
            #expect(dirty.consumedWasSane)
        }
    }

    @Test func teltonikaClosesOnGarbageAfterValidFrames() throws {
        let v19 = try #require(TeltonikaVectorTests.vector("V19")).frame
        var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
        runner.feed(TeltonikaVectorTests.imeiFrame + v19 + [0x00, 0x00, 0x12, 0x34])
        #expect(runner.messages.count == 2)
        #expect(runner.events.last == .invalid(reason: "syntax", close: true))
    }

    @Test func teltonikaTruncatedFrameFollowedByAnotherFailsItsCRC() throws {
        let v19 = try #require(TeltonikaVectorTests.vector("V19")).frame
        var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
        runner.feed(TeltonikaVectorTests.imeiFrame + v19.prefix(40) + v19 + v19)
        #expect(runner.messages.count == 1)
        #expect(runner.events.dropFirst().first == .invalid(reason: "checksum", close: true))
    }

    // MARK: - Absurd length fields

    @Test func teltonikaLengthOfAllOnesIsTooLargeBeforeItsDataArrives() {
        var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
        runner.feed(TeltonikaVectorTests.imeiFrame)
        let events = runner.feed([0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(events == [.invalid(reason: "too_large", close: true)])
        // An IMEI length above the limit too, with only the length field read.
        var imei = CodecRunner(TeltonikaCodec(transport: .tcp, limits: TrackerLimits(maxFrameBytes: 1024)))
        #expect(imei.feed([0x7F, 0xFF]) == [.invalid(reason: "too_large", close: true)])
    }

    @Test func gt06ExtendedLengthOfAllOnesIsTooLargeBeforeItsContentArrives() {
        var runner = CodecRunner(GT06Codec(limits: limits))
        let events = runner.feed([0x79, 0x79, 0xFF, 0xFF])
        #expect(events.first == .invalid(reason: "too_large", close: false))
        // The stream goes on at the next marker.
        let login = GT06VectorTests.vector("V2")?.frame ?? []
        runner.feed([0x01, 0x02] + login)
        #expect(runner.messages.count == 1)
    }

    @Test func h02SentenceWithoutHashWithinTheLimitIsTooLarge() {
        var runner = CodecRunner(H02Codec(limits: TrackerLimits(maxFrameBytes: 128), acknowledgePositions: false))
        let events = runner.feed(Array("*HQ,1234567890,V1,".utf8) + [UInt8](repeating: 0x41, count: 200))
        #expect(events.first == .invalid(reason: "too_large", close: false))
        // The next sentence still decodes.
        runner.feed(H02VectorTests.vector("V50")?.frame ?? [])
        #expect(runner.messages.count == 1)
    }

    // MARK: - Random input

    @Test(arguments: [1, 2, 3])
    func randomBytesNeverTrapAndAlwaysMakeProgress(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        let bytes = (0..<60_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let sizes = (0..<100).map { _ in Int.random(in: 1...700, using: &rng) }
        let tcp = Self.run({ TeltonikaCodec(transport: .tcp, limits: limits) }, bytes, chunks: sizes)
        #expect(tcp.consumedWasSane)
        let gt06 = Self.run({ GT06Codec(limits: limits) }, bytes, chunks: sizes)
        #expect(gt06.consumedWasSane)
        let h02 = Self.run({ H02Codec(limits: limits, acknowledgePositions: true) }, bytes, chunks: sizes)
        #expect(h02.consumedWasSane)
        // UDP: every datagram is decoded on its own.
        var udp = TeltonikaCodec(transport: .udp, limits: limits)
        var index = 0
        for size in sizes where index + size <= bytes.count {
            let result = bytes[index..<(index + size)].withUnsafeBytes { udp.decode($0, now: Timestamp(milliseconds: 0)) }
            if case .invalid(_, let consumed, let close) = result {
                #expect(consumed == size && !close)
            }
            index += size
        }
    }

    @Test func everyValidFrameWithOneByteChangedNeverTraps() {
        // Corrupted vectors: every byte position of a few frames set to a few values, including
        // length fields and counts. Checked frames must not come out as the original message.
        var rng = SeededGenerator(seed: 99)
        let teltonika = ["V8", "V14", "V22", "V17"].compactMap { TeltonikaVectorTests.vector($0)?.frame }
        let gt06 = ["V2", "V25", "V73", "V13"].compactMap { GT06VectorTests.vector($0)?.frame }
        let h02 = ["V50", "V64", "V7", "V35"].compactMap { H02VectorTests.vector($0)?.frame }
        for frame in teltonika {
            for index in frame.indices {
                var copy = frame
                copy[index] = UInt8.random(in: 0...255, using: &rng)
                var runner = CodecRunner(TeltonikaCodec(transport: .tcp, limits: limits))
                runner.feed(TeltonikaVectorTests.imeiFrame)
                runner.feed(copy)
                #expect(runner.consumedWasSane)
                var udp = TeltonikaCodec(transport: .udp, limits: limits)
                _ = copy.withUnsafeBytes { udp.decode($0, now: Timestamp(milliseconds: 0)) }
            }
        }
        for frame in gt06 + h02 {
            for index in frame.indices {
                var copy = frame
                copy[index] = UInt8.random(in: 0...255, using: &rng)
                let a = Self.run({ GT06Codec(limits: limits) }, copy + frame)
                #expect(a.consumedWasSane)
                let b = Self.run({ H02Codec(limits: limits, acknowledgePositions: true) }, copy + [0x2A])
                #expect(b.consumedWasSane)
            }
        }
    }
}
