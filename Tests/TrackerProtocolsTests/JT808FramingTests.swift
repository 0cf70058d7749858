import GatewayCore
import GatewayTesting
import Testing
@testable import TrackerProtocols

/// JT/T 808 framing, splits and answers on bytes: any cut of a stream gives the same messages,
/// bad frames are skipped without losing the next, split messages come back whole.
@Suite struct JT808FramingTests {
    static let phone: [UInt8] = [0x01, 0x39, 0x12, 0x34, 0x56, 0x78]

    /// An unescaped 2013 frame (header … body, check code appended), escaped between marks.
    static func frame(_ id: UInt16, _ body: [UInt8], serial: UInt16, split: (UInt16, UInt16)? = nil, attributes extra: UInt16 = 0,
                      phone: [UInt8] = phone) -> [UInt8] {
        var data = word(id) + word(UInt16(body.count) | (split == nil ? 0 : 0x2000) | extra) + phone + word(serial)
        if let (total, index) = split { data += word(total) + word(index) }
        data += body
        data.append(data.reduce(0, ^))
        return escapeWrapped(data)
    }

    static func escapeWrapped(_ data: [UInt8]) -> [UInt8] {
        [0x7E] + data.flatMap { $0 == 0x7E ? [0x7D, 0x02] : $0 == 0x7D ? [0x7D, 0x01] : [$0] } + [0x7E]
    }

    static func word(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }

    /// A location whose coordinates hold 7E and 7D bytes (escaped on the wire).
    static let location: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 3, 0x01, 0x57, 0x7E, 0x7D, 0x06, 0xCA, 0x7D, 0x7E, 0, 10, 0, 0, 0, 0]
        + [0x26, 0x12, 0x05, 0x09, 0x30, 0x00]

    static var stream: [UInt8] {
        frame(0x0002, [], serial: 1) + frame(0x0200, location, serial: 2) + [0x24, 0x24] + frame(0x0900, [0xF0] + Array("hello".utf8), serial: 3)
            + frame(0x0704, [0, 2, 0] + word(UInt16(location.count)) + location + word(UInt16(location.count)) + location, serial: 4)
    }

    static func codec() -> JT808Codec { JT808Codec(options: .init(limits: TrackerLimits(maxFrameBytes: 4096))) }

    @Test func anyCutOfTheStreamGivesTheSameMessages() {
        var whole = CodecRunner(Self.codec())
        whole.feed(Self.stream)
        #expect(whole.messages.count == 4)
        #expect(whole.events.filter { $0.message == nil } == [.invalid(reason: "syntax", close: false)])
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<50 {
            var chunked = CodecRunner(Self.codec())
            chunked.feed(Self.stream, chunks: (0..<8).map { _ in Int.random(in: 1...17, using: &generator) })
            #expect(firstDifference(chunked.messages, whole.messages) == nil)
            #expect(chunked.consumedWasSane)
        }
        var bytewise = CodecRunner(Self.codec())
        bytewise.feed(Self.stream, chunks: [1])
        #expect(firstDifference(bytewise.messages, whole.messages) == nil)
    }

    @Test func escapedCoordinatesAreReadUnescaped() throws {
        var runner = CodecRunner(Self.codec())
        let position = try #require(runner.feed(Self.frame(0x0200, Self.location, serial: 2)).first?.message?.records?.positions.first)
        #expect(position.latitude == Double(0x01577E7D) / 1e6)
        #expect(position.longitude == Double(0x06CA7D7E) / 1e6)
    }

    @Test func badFramesAreSkippedAndTheNextFrameIsRead() {
        var badCheck = Self.frame(0x0200, Self.location, serial: 2)
        badCheck[badCheck.count - 2] ^= 0x55
        var wrongLength = Self.frame(0x0002, [1, 2], serial: 5)
        wrongLength[4] = 0x05  // the body length field says 5
        let badEscape: [UInt8] = [0x7E, 0x00, 0x02, 0x7D, 0x03, 0x7E]
        for (bad, reason) in [(badCheck, "checksum"), (Self.escapeWrappedFix(wrongLength), "length"), (badEscape, "syntax"), ([0x7E, 0x7E], "syntax")] {
            var runner = CodecRunner(Self.codec())
            let events = runner.feed(bad + Self.frame(0x0002, [], serial: 9))
            #expect(events.first == .invalid(reason: reason, close: false), "\(reason): \(events)")
            #expect(events.compactMap(\.message).map(\.controlKind) == ["0x0002"], "\(reason): \(events)")
        }
    }

    /// A frame whose length field was changed after it was built: its check code made right again.
    static func escapeWrappedFix(_ frame: [UInt8]) -> [UInt8] {
        var data = Array(frame.dropFirst().dropLast())
        data.removeLast()
        data.append(data.reduce(0, ^))
        return escapeWrapped(data)
    }

    @Test func aFrameWithoutItsEndWithinTheLimitIsTooLarge() {
        var runner = CodecRunner(JT808Codec(options: .init(limits: TrackerLimits(maxFrameBytes: 64))))
        let events = runner.feed([0x7E] + [UInt8](repeating: 0x30, count: 100) + Self.frame(0x0002, [], serial: 1))
        #expect(events.first == .invalid(reason: "too_large", close: false))
        #expect(events.compactMap(\.message).map(\.controlKind) == ["0x0002"])
    }

    @Test func anEncryptedBodyIsAnsweredNotSupported() throws {
        var runner = CodecRunner(Self.codec())
        let message = try #require(runner.feed(Self.frame(0x0200, Self.location, serial: 7, attributes: 0x0400)).first?.message)
        #expect(message.controlKind == "encrypted")
        #expect(message.answer?.suffix(5) == Self.word(7) + [0x02, 0x00, 3])
    }

    @Test func answersAreNumberedAsTheyGoOutAndEscaped() throws {
        var codec = Self.codec()
        // A phone whose BCD holds 7E and 7D bytes is escaped in the answer (and the check code too).
        let phone: [UInt8] = [0x7E, 0x7D, 0x00, 0x00, 0x00, 0x01]
        var runner = CodecRunner(Self.codec())
        let heartbeat = try #require(runner.feed(Self.frame(0x0002, [], serial: 0x7E7D, phone: phone)).first?.message?.answer)
        for expectedSerial: UInt16 in [0, 1, 2] {
            let wire = codec.outgoing(heartbeat)
            #expect(wire.first == 0x7E && wire.last == 0x7E && !wire.dropFirst().dropLast().contains(0x7E))
            let data = unescape(Array(wire.dropFirst().dropLast()))
            #expect(Array(data[4..<10]) == phone)
            #expect(Array(data[10..<12]) == Self.word(expectedSerial))
            #expect(Array(data[12..<17]) == [0x7E, 0x7D, 0x00, 0x02, 0])
            #expect(data.dropLast().reduce(0, ^) == data.last)
        }
    }

    func unescape(_ raw: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var k = 0
        while k < raw.count {
            if raw[k] == 0x7D { out.append(raw[k + 1] == 1 ? 0x7D : 0x7E); k += 2 } else { out.append(raw[k]); k += 1 }
        }
        return out
    }

    // MARK: - Batches with a bad item

    /// `location` with another time (BCD seconds) and, with `badLatitude`, a latitude of 4294.967295°.
    static func item(second: UInt8, badLatitude: Bool = false) -> [UInt8] {
        var l = location
        l[27] = second
        if badLatitude { l.replaceSubrange(8..<12, with: [0xFF, 0xFF, 0xFF, 0xFF]) }
        return l
    }

    /// A 0x0704 of four fixes where the second is off the Earth and the third too short to be a
    /// location: the two good ones are kept and answered once committed (the records' answer,
    /// never at once), the other two counted; the terminal, answered, deletes all four.
    @Test func aBatchKeepsItsGoodFixesWhenSomeAreUndecodable() throws {
        let items = [Self.item(second: 1), Self.item(second: 2, badLatitude: true), Array(Self.item(second: 3).prefix(10)), Self.item(second: 4)]
        let body = Self.word(4) + [0] + items.flatMap { Self.word(UInt16($0.count)) + $0 }
        var runner = CodecRunner(Self.codec())
        let message = try #require(runner.feed(Self.frame(0x0704, body, serial: 7)).first?.message)
        let records = try #require(message.records, "\(summary(message))")
        #expect(records.positions.map { $0.time.map { $0.milliseconds / 1000 % 60 } } == [1, 4])
        #expect(records.undecoded == 2)
        #expect(records.answer?.suffix(5) == Self.word(7) + [0x07, 0x04, 0])
    }

    /// A batch cut short inside an item: what came before is kept; the items it announced and
    /// does not hold are counted.
    @Test func aBatchCutShortKeepsTheFixesBeforeTheCut() throws {
        let good = Self.item(second: 1)
        let body = Self.word(3) + [0] + Self.word(UInt16(good.count)) + good + Self.word(UInt16(good.count)) + good.prefix(5)
        var runner = CodecRunner(Self.codec())
        let records = try #require(runner.feed(Self.frame(0x0704, body, serial: 8)).first?.message?.records)
        #expect(records.positions.count == 1)
        #expect(records.undecoded == 2)
    }

    /// Nothing to keep: answered at once as `undecoded`, as before.
    @Test func aBatchWithNoDecodableFixIsUndecoded() throws {
        let bad = Self.item(second: 1, badLatitude: true)
        var runner = CodecRunner(Self.codec())
        let message = try #require(runner.feed(Self.frame(0x0704, Self.word(1) + [0] + Self.word(UInt16(bad.count)) + bad, serial: 9)).first?.message)
        #expect(message.controlKind == "undecoded")
        #expect(message.answer?.suffix(5) == Self.word(9) + [0x07, 0x04, 0])
    }

    /// Vendor 0x0210: a good fix, then one off the Earth, then a length byte that runs past the body.
    @Test func aVendorBatchKeepsItsGoodFixes() throws {
        let good = Self.item(second: 1), bad = Self.item(second: 2, badLatitude: true)
        let body = [UInt8(good.count)] + good + [UInt8(bad.count)] + bad + [60, 0, 0]
        var runner = CodecRunner(Self.codec())
        let records = try #require(runner.feed(Self.frame(0x0210, body, serial: 10)).first?.message?.records)
        #expect(records.positions.count == 1)
        #expect(records.undecoded == 2)
        #expect(records.answer?.suffix(5) == Self.word(10) + [0x02, 0x10, 0])
    }

    // MARK: - Splits

    /// A 0x0704 batch of `count` locations cut into `packets` packets with consecutive serials from `first`.
    static func splitBatch(count: Int, packets: Int, first: UInt16, phone: [UInt8] = phone) -> [[UInt8]] {
        var body = word(UInt16(count)) + [0]
        for k in 0..<count {
            var l = location
            l[27] = UInt8(k)  // BCD seconds 00…09
            body += word(UInt16(l.count)) + l
        }
        let size = (body.count + packets - 1) / packets
        return (0..<packets).map { k in
            let piece = Array(body[(k * size)..<min(body.count, (k + 1) * size)])
            return frame(0x0704, piece, serial: first &+ UInt16(k), split: (UInt16(packets), UInt16(k + 1)), phone: phone)
        }
    }

    @Test(arguments: [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 1, 3, 0, 2]])
    func aSplitMessageIsWholeInAnyOrderOfItsPackets(order: [Int]) throws {
        let packets = Self.splitBatch(count: 8, packets: 4, first: 0xFFFE)  // serials wrap past 0xFFFF
        var runner = CodecRunner(Self.codec())
        for k in order { runner.feed(packets[k]) }
        let records = runner.messages.compactMap(\.records)
        #expect(records.count == 1)
        let whole = try #require(records.first)
        #expect(whole.positions.count == 8)
        #expect(whole.positions.map { $0.time?.milliseconds } == (0..<8).map { Timestamp(year: 2026, month: 12, day: 5, hour: 1, minute: 30, second: $0).milliseconds })
        // One answer, to the message's serial (its first packet's).
        #expect(whole.answer?.suffix(5) == Self.word(0xFFFE) + [0x07, 0x04, 0])
        #expect(runner.messages.filter { $0.controlKind == "split_packet" }.count == order.count - 1)
    }

    @Test func twoTerminalsSplitMessagesDoNotMix() {
        let other: [UInt8] = [0x01, 0x39, 0, 0, 0, 0x02]
        let a = Self.splitBatch(count: 4, packets: 2, first: 10), b = Self.splitBatch(count: 4, packets: 2, first: 10, phone: other)
        var runner = CodecRunner(Self.codec())
        for f in [a[0], b[0], b[1], a[1]] { runner.feed(f) }
        #expect(runner.messages.compactMap(\.records).map(\.deviceID) == ["13900000002", "13912345678"])
    }

    @Test func missingPacketsAreAskedForThenTheMessageIsDropped() {
        var split = JT808Split(limits: .init(maxBytes: 1 << 20, maxMessages: 8, timeoutMilliseconds: 60_000, maxRequests: 2))
        let packets = Self.splitBatch(count: 8, packets: 4, first: 100)
        let header = { (k: Int) -> (JT808Wire.Header, [UInt8]) in
            let data = Array(self.unescape(Array(packets[k].dropFirst().dropLast())).dropLast())
            let h = data.withUnsafeBytes { JT808Wire.Header.parse($0) }!
            return (h, Array(data[h.size...]))
        }
        for k in [0, 2] {
            let (h, body) = header(k)
            _ = body.withUnsafeBytes { split.add(h, body: $0, now: 1_000) }
        }
        #expect(split.requests(now: 1_500, quietSince: 500).isEmpty, "not quiet yet")
        let first = split.requests(now: 2_000, quietSince: 1_000)
        #expect(first.map(\.missing) == [[2, 4]])
        #expect(first.first?.header.serial == 100)
        // Two requests spread over the 60 s: the next one 30 s later, then none.
        #expect(split.requests(now: 3_000, quietSince: 2_000).isEmpty, "asked again before its time")
        #expect(split.requests(now: 32_000, quietSince: 31_000).map(\.missing) == [[2, 4]])
        #expect(split.requests(now: 60_000, quietSince: 59_000).isEmpty)
        #expect(split.takeCounts().isEmpty, "kept until its timeout")
        #expect(split.requests(now: 61_001, quietSince: 60_001).isEmpty)
        #expect(split.takeCounts() == ["split.incomplete"])
        #expect(split.bytes == 0 && split.pending.isEmpty)
    }

    /// The unnumbered 0x8003 bodies an idle call at `milliseconds` wrote, and what it counted.
    static func idle(_ runner: inout CodecRunner<JT808Codec>, at milliseconds: Int64) -> (requests: [[UInt8]], counts: [String]) {
        let out = runner.codec.idle(now: Timestamp(milliseconds: milliseconds), ending: false)
        return (out.answers.map { Array($0[12...]) }, out.counts)
    }

    /// M1 (4 packets, serials 100…103) lost its first packet and was asked for it; the terminal
    /// does not send it again and goes on with M2, numbered on from M1 (104…) or anew (200…).
    /// M2's first packet is M2's: M1 is not completed with it, M2 is whole on its own.
    @Test(arguments: [UInt16(104), 200])
    func aNewMessageDoesNotCompleteAnOlderOneAskedFor(next: UInt16) throws {
        let m1 = Self.splitBatch(count: 8, packets: 4, first: 100), m2 = Self.splitBatch(count: 4, packets: 4, first: next)
        var runner = CodecRunner(Self.codec())
        let start = runner.now.milliseconds
        for f in m1[1...] { runner.feed(f) }
        #expect(Self.idle(&runner, at: start + 2_000).requests == [Self.word(100) + [1] + Self.word(1)])
        runner.now = Timestamp(milliseconds: start + 2_500)
        for f in m2 { runner.feed(f) }
        let records = runner.messages.compactMap(\.records)
        #expect(records.count == 1)
        let whole = try #require(records.first)
        #expect(whole.positions.map { $0.time.map { $0.milliseconds / 1000 % 60 } } == [0, 1, 2, 3], "\(runner.messages.map(summary))")
        #expect(whole.answer?.suffix(5) == Self.word(next) + [0x07, 0x04, 0])
    }

    /// The standard's resend: the missing packet again under its own serial completes its message.
    @Test func aPacketSentAgainUnderItsOwnSerialCompletesItsMessage() throws {
        let m1 = Self.splitBatch(count: 8, packets: 4, first: 100)
        var runner = CodecRunner(Self.codec())
        let start = runner.now.milliseconds
        for k in [0, 2, 3] { runner.feed(m1[k]) }
        #expect(Self.idle(&runner, at: start + 2_000).requests == [Self.word(100) + [1] + Self.word(2)])
        runner.now = Timestamp(milliseconds: start + 2_500)
        runner.feed(m1[1])
        let whole = try #require(runner.messages.compactMap(\.records).first)
        #expect(whole.positions.count == 8)
        #expect(whole.answer?.suffix(5) == Self.word(100) + [0x07, 0x04, 0])
    }

    /// A quiet terminal is asked for the missing packets when the message has been quiet for a
    /// second, then twice more spread over `split_timeout` (60 s); the message is kept until then
    /// and dropped at it (`split.incomplete`), idle calls once a second throughout.
    @Test func aQuietMessageIsAskedForThreeTimesWithinItsTimeoutThenDropped() {
        let packets = Self.splitBatch(count: 8, packets: 4, first: 100)
        var runner = CodecRunner(Self.codec())
        let start = runner.now.milliseconds
        runner.feed(packets[0])
        runner.feed(packets[1])
        var asked: [Int64] = [], dropped: [Int64] = []
        for second in Int64(1)...70 {
            let (requests, counts) = Self.idle(&runner, at: start + second * 1_000)
            for r in requests {
                #expect(r == Self.word(100) + [2] + Self.word(3) + Self.word(4))
                asked.append(second)
            }
            if counts.contains("split.incomplete") { dropped.append(second) }
            #expect(!counts.contains("split.expired"), "a message asked for is incomplete, not expired")
        }
        #expect(asked.count == 3 && asked.first == 1 && (asked.last ?? 99) < 60, "asked at \(asked) s")
        #expect(dropped == [61], "dropped at \(dropped) s")
    }

    /// The missing packets sent late in the window still complete the message.
    @Test func missingPacketsArrivingLateInTheWindowCompleteTheMessage() throws {
        let packets = Self.splitBatch(count: 8, packets: 4, first: 100)
        var runner = CodecRunner(Self.codec())
        let start = runner.now.milliseconds
        runner.feed(packets[0])
        runner.feed(packets[1])
        for second in Int64(1)...45 { _ = Self.idle(&runner, at: start + second * 1_000) }
        runner.now = Timestamp(milliseconds: start + 45_500)
        runner.feed(packets[2])
        runner.feed(packets[3])
        #expect(try #require(runner.messages.compactMap(\.records).first).positions.count == 8)
    }

    @Test func aSplitMessagePastItsDeadlineOrItsBoundIsDroppedAndCounted() {
        var split = JT808Split(limits: .init(maxBytes: 64, maxMessages: 8, timeoutMilliseconds: 1_000, maxRequests: 3))
        let h = JT808Wire.Header(messageID: 0x0704, attributes: 0x2000, version: nil, phone: Self.phone, serial: 1, total: 3, index: 1, size: 16)
        _ = [UInt8](repeating: 1, count: 40).withUnsafeBytes { split.add(h, body: $0, now: 0) }
        var second = h
        second.serial = 2
        second.index = 2
        // 40 + 40 bytes pass the bound of 64: the whole message goes.
        guard case .tooLarge = [UInt8](repeating: 2, count: 40).withUnsafeBytes({ split.add(second, body: $0, now: 10) }) else {
            Issue.record("expected tooLarge")
            return
        }
        #expect(split.bytes == 0)
        _ = [UInt8](repeating: 1, count: 10).withUnsafeBytes { split.add(h, body: $0, now: 100) }
        #expect(split.bytes == 10)
        _ = split.requests(now: 1_200, quietSince: 0)
        #expect(split.takeCounts() == ["split.too_large", "split.expired"])
        #expect(split.bytes == 0)
    }

    @Test func theResendRequestFollowsTheVersion() {
        let h2013 = JT808Wire.Header(messageID: 0x0704, attributes: 0, version: nil, phone: Self.phone, serial: 0x0102, size: 12)
        let r2013 = JT808Codec.resendRequest(h2013, missing: [2, 5])
        #expect(Array(r2013[12...]) == [0x01, 0x02, 2, 0, 2, 0, 5])
        let h2019 = JT808Wire.Header(messageID: 0x0704, attributes: 0x4000, version: 1, phone: [UInt8](repeating: 0, count: 10), serial: 0x0102, size: 17)
        let r2019 = JT808Codec.resendRequest(h2019, missing: [2])
        #expect(Array(r2019[17...]) == [0x01, 0x02, 0, 1, 0, 2])
        #expect(r2019[2] & 0x40 != 0 && r2019[4] == 1)
    }
}
