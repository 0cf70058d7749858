import Foundation
import GatewayCore
import GatewayTesting
import NMEA
import NTRIP
import RTCM
import SystemIO
import Testing

/// The client against real peers on loopback: RTKLIB's str2str as an NTRIP 1 caster, and the
/// tests' own caster for NTRIP 2 chunked, GGA, 401, a caster that dies and one that stalls.
/// Back-off runs on a ManualClock; every wait is for a condition, bounded.
@Suite(.serialized, .timeLimit(.minutes(2))) struct NTRIPClientTests {
    static func configuration(port: Int, version: Int, user: String? = "rover", password: String? = "secret") -> NTRIPConfiguration {
        var c = NTRIPConfiguration(host: "127.0.0.1", port: port, mountpoint: "MOUNT")
        c.version = version
        c.user = user
        c.password = password
        c.gga = .never
        return c
    }

    @Test func str2strAsNTRIP1CasterDeliversExactlyTheFramesInOrder() async throws {
        let caster = try Str2strCaster()
        try await caster.start()
        defer { caster.stop() }
        let (bytes, frames) = try RTCMFixtures.stream("rtcm3.2")
        var c = Self.configuration(port: caster.casterPort, version: 1)
        // auto: the client reads str2str's sourcetable (no nmea flag for MOUNT) and sends no GGA.
        c.gga = .auto
        let client = ClientUnderTest(c, clock: SystemClock())
        client.start()
        try await client.until("connected") { $0.connected }
        // The base station's stream, junk and all (the capture starts mid-frame), in odd pieces.
        let input = try LoopbackTCPClient(port: caster.inputPort)
        var offset = 0
        var rng = SeededGenerator(seed: 47)
        while offset < bytes.count {
            let n = min(Int.random(in: 1...1500, using: &rng), bytes.count - offset)
            #expect(input.send(Array(bytes[offset..<(offset + n)])))
            offset += n
        }
        try await client.until("192 frames") { $0.frames >= frames.count }
        await client.stop()
        input.close()
        #expect(client.frames.all == frames, "the frames written are the caster's, whole, in order, none foreign")
        let s = client.statistics
        #expect(s.crcFailures == 0 && s.frames == 192 && s.bytes == bytes.count)
        #expect(s.framesByType[1077] == 23 && s.framesByType[63] == 13)
        #expect(s.ggaSent == 0)
        #expect(client.log.entries.contains { $0.message.contains("nmea=0: not sending GGA") })
    }

    @Test func aWrongPasswordIsReportedOnceAndRetriedSlowly() async throws {
        let caster = try Str2strCaster()
        try await caster.start()
        defer { caster.stop() }
        let clock = ManualClock()
        let client = ClientUnderTest(Self.configuration(port: caster.casterPort, version: 1, password: "wrong"), clock: clock)
        client.start()
        for attempt in 1...3 {
            try await client.until("401 number \(attempt)") { $0.unauthorized == attempt }
            #expect(await Poll.until(timeout: .seconds(10)) { clock.sleeperCount == 1 })
            let delay = try #require(client.statistics.lastDelay)
            #expect(delay == .seconds(600), "a 401 waits the slow retry (jitter 0.5: none)")
            clock.advance(by: delay)
        }
        await client.stop()
        let errors = client.log.entries.filter { $0.level == .error }
        #expect(errors.count == 1 && errors[0].message.contains("401 Unauthorized"))
        #expect(client.statistics.frames == 0 && client.statistics.attempts >= 3)
    }

    static let chunkedHead = "HTTP/1.1 200 OK\r\nNtrip-Version: Ntrip/2.0\r\nContent-Type: gnss/data\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n"

    /// Sends `bytes` as HTTP chunks of 1…97 bytes, each written in two pieces (size line, then data).
    static func sendChunked(_ bytes: [UInt8], on connection: TestCaster.Connection, seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var offset = 0
        while offset < bytes.count {
            let n = min(Int.random(in: 1...97, using: &rng), bytes.count - offset)
            guard connection.send(String(n, radix: 16) + "\r\n"), connection.send(Array(bytes[offset..<(offset + n)]) + [13, 10]) else { return }
            offset += n
        }
    }

    @Test func anNTRIP2CasterWithChunksThatCutFramesDeliversExactlyTheFrames() async throws {
        let (bytes, frames) = try RTCMFixtures.stream("rtcm3.bndm")
        let caster = try TestCaster(clock: SystemClock()) { connection in
            connection.send(Self.chunkedHead)
            Self.sendChunked(bytes, on: connection, seed: 11)
            connection.send("0\r\n\r\n")
            connection.close()
        }.start()
        defer { caster.stop() }
        let client = ClientUnderTest(Self.configuration(port: caster.port, version: 2), clock: ManualClock())
        client.start()
        try await client.until("100 frames") { $0.frames >= frames.count }
        await client.stop()
        #expect(client.frames.all == frames)
        #expect(client.statistics.crcFailures == 0)
        let request = try #require(caster.requests.first)
        #expect(request.hasPrefix("GET /MOUNT HTTP/1.1\r\n"))
        #expect(request.contains("Ntrip-Version: Ntrip/2.0\r\n"))
        #expect(request.contains("Authorization: Basic \(Data("rover:secret".utf8).base64EncodedString())\r\n"))
    }

    @Test func ggaGoesUpEveryIntervalOnceThereIsAFix() async throws {
        let clock = ManualClock()
        let frame = RTCMFrame.encode(payload: [0x3E, 0xD0, 0x00, 0x03])
        let caster = try TestCaster(clock: clock) { connection in
            connection.send(Self.chunkedHead)
            // One frame, then the connection stays open (the stall timeout is long).
            Self.sendChunked(frame, on: connection, seed: 3)
            _ = connection
        }.start()
        defer { caster.stop() }
        var c = Self.configuration(port: caster.port, version: 2)
        c.gga = .always
        c.ggaInterval = .seconds(5)
        c.stallTimeout = .seconds(3600)
        let client = ClientUnderTest(c, clock: clock)
        client.start()
        try await client.until("connected") { $0.connected && $0.frames == 1 }
        // No fix yet: nothing goes up.
        try await clock.advance(by: .seconds(7), client: client)
        #expect(caster.lines.isEmpty)
        var p = Position(datum: .wgs84, source: "gnss")
        p.mode = .threeD
        p.quality = .rtkFixed
        p.latitude = 48.2
        p.longitude = 16.4
        p.altitude = 180
        p.time = clock.now()
        client.fix.value = p
        let first = clock.now()
        try await client.until("the first GGA") { $0.ggaSent == 1 }
        try await clock.advance(by: .seconds(20), client: client)
        try await client.until("5 GGA") { $0.ggaSent == 5 }
        #expect(await Poll.until(timeout: .seconds(10)) { caster.lines.count == 5 })
        await client.stop()
        let lines = caster.lines
        for (k, line) in lines.enumerated() {
            // Every interval (±1 s) on the client's clock, from the first fix on.
            let expected = first.milliseconds + Int64(k) * 5000
            #expect(line.at.milliseconds >= expected && line.at.milliseconds < expected + 1000, "GGA \(k) at \(line.at.milliseconds - first.milliseconds) ms")
            #expect(Self.checksumIsValid(line.text), "\(line.text)")
            var decoder = NMEADecoder(options: NMEAOptions())
            var out: [Position] = []
            Array(line.text.utf8).withUnsafeBytes { decoder.decode($0, into: &out) }
            decoder.flush(into: &out)
            #expect(out.first.map { abs(($0.latitude ?? 0) - 48.2) < 1e-7 && abs(($0.longitude ?? 0) - 16.4) < 1e-7 && $0.quality == .rtkFixed } == true)
        }
    }

    @Test func autoGGAFollowsTheMountpointsNMEAFlagInTheSourcetable() async throws {
        let frame = RTCMFrame.encode(payload: [0x3E, 0xD0, 0x00, 0x03])
        let caster = try TestCaster(clock: SystemClock()) { connection in
            if connection.request.hasPrefix("GET / ") {
                connection.send("SOURCETABLE 200 OK\r\nContent-Type: text/plain\r\n\r\n")
                connection.send("STR;MOUNT;VRS;RTCM 3.2;1005(10);2;GPS;NET;AUT;48.20;16.40;1;1;test;none;B;N;2400;\r\nENDSOURCETABLE\r\n")
                connection.close()
                return
            }
            connection.send("ICY 200 OK\r\n")
            connection.send(frame)
        }.start()
        defer { caster.stop() }
        var c = Self.configuration(port: caster.port, version: 1)
        c.gga = .auto
        let client = ClientUnderTest(c, clock: SystemClock())
        var p = Position(datum: .wgs84, source: "gnss")
        p.mode = .threeD
        p.latitude = 48.2
        p.longitude = 16.4
        client.fix.value = p
        client.start()
        try await client.until("a GGA") { $0.ggaSent >= 1 }
        #expect(await Poll.until(timeout: .seconds(10)) { caster.lines.contains { $0.text.hasPrefix("$GPGGA,") } })
        await client.stop()
        #expect(caster.requests.first?.hasPrefix("GET / HTTP/1.0") == true, "the sourcetable is read first")
        #expect(client.log.entries.contains { $0.message.contains("nmea=1: sending GGA") })
    }

    /// `$BODY*HH\r\n` with HH the XOR of BODY.
    static func checksumIsValid(_ line: String) -> Bool {
        let bytes = Array(line.utf8)
        guard bytes.first == UInt8(ascii: "$"), bytes.suffix(2) == [13, 10], let star = bytes.lastIndex(of: UInt8(ascii: "*")) else { return false }
        return UInt8(String(decoding: bytes[(star + 1)..<(bytes.count - 2)], as: UTF8.self), radix: 16) == NMEAChecksum.compute(bytes[1..<star])
    }

    @Test func aCasterThatDiesIsBackedOffGrowingAndRecoveredFrom() async throws {
        let (bytes, frames) = try RTCMFixtures.stream("rtcm3.bndm")
        let caster = try TestCaster(clock: SystemClock()) { connection in
            if connection.index <= 3 {
                // Dies: the head and part of a frame, then the connection drops.
                connection.send("ICY 200 OK\r\n")
                connection.send(Array(bytes.prefix(40)))
                connection.close()
                return
            }
            connection.send("ICY 200 OK\r\n")
            connection.send(bytes)
            connection.close()
        }.start()
        defer { caster.stop() }
        let clock = ManualClock()
        let client = ClientUnderTest(Self.configuration(port: caster.port, version: 1), clock: clock)
        client.start()
        var delays: [Duration] = []
        for attempt in 1...3 {
            try await client.until("attempt \(attempt) over") { $0.attempts == attempt && !$0.connected && $0.lastDelay != nil }
            #expect(await Poll.until(timeout: .seconds(10)) { clock.sleeperCount == 1 })
            let delay = try #require(client.statistics.lastDelay)
            delays.append(delay)
            clock.advance(by: delay)
            try await client.until("attempt \(attempt + 1) started") { $0.attempts == attempt + 1 }
        }
        #expect(delays == [.seconds(10), .seconds(20), .seconds(40)], "≥ 10 s, growing")
        try await client.until("all frames") { $0.frames >= frames.count }
        await client.stop()
        // The pieces of the dead connections were partial frames: nothing of them reached the port.
        #expect(client.frames.all == frames)
        #expect(client.statistics.reconnects >= 3)
    }

    @Test func aStalledStreamIsDetectedAndReconnected() async throws {
        let (_, frames) = try RTCMFixtures.stream("rtcm3.bndm")
        let caster = try TestCaster(clock: SystemClock()) { connection in
            connection.send("ICY 200 OK\r\n")
            if connection.index == 1 {
                // Five frames and ten bytes of the sixth, then silence with the connection open.
                connection.send(Array(frames.prefix(5).joined()) + Array(frames[5].prefix(10)))
                return
            }
            connection.send(Array(frames.joined()))
        }.start()
        defer { caster.stop() }
        let clock = ManualClock()
        var c = Self.configuration(port: caster.port, version: 1)
        c.stallTimeout = .seconds(15)
        let client = ClientUnderTest(c, clock: clock)
        client.start()
        try await client.until("five frames") { $0.frames == 5 }
        try await clock.advance(by: .seconds(14), client: client)
        #expect(client.statistics.stalls == 0)
        clock.advance(by: .seconds(1))
        try await client.until("the stall") { $0.stalls == 1 && !$0.connected }
        #expect(await Poll.until(timeout: .seconds(10)) { clock.sleeperCount == 1 })
        let delay = try #require(client.statistics.lastDelay)
        #expect(delay >= .seconds(10))
        clock.advance(by: delay)
        try await client.until("the second connection's frames") { $0.frames == 5 + frames.count }
        await client.stop()
        #expect(client.frames.all == Array(frames.prefix(5)) + frames)
        #expect(client.log.entries.contains { $0.message.contains("no bytes for 15s") })
    }

    @Test func theSourcetableIsReadFromBothVersions() async throws {
        let table = NTRIPProtocolTests.table.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n"
        let caster = try TestCaster(clock: SystemClock()) { connection in
            if connection.request.contains("HTTP/1.1") {
                connection.send("HTTP/1.1 200 OK\r\nContent-Type: gnss/sourcetable\r\nTransfer-Encoding: chunked\r\n\r\n")
                Self.sendChunked(Array(table.utf8), on: connection, seed: 5)
                connection.send("0\r\n\r\n")
            } else {
                connection.send("SOURCETABLE 200 OK\r\nContent-Type: text/plain\r\n\r\n" + table)
            }
            connection.close()
        }.start()
        defer { caster.stop() }
        for version in [1, 2] {
            var c = Self.configuration(port: caster.port, version: version)
            c.mountpoint = ""
            let t = try await NTRIPSourcetableRequest.fetch(c, wakeup: try Wakeup(), timeout: .seconds(10))
            #expect(t.streams.map(\.mountpoint) == ["VRS_RTCM32", "BASE1", "MOUNT"], "version \(version)")
            #expect(t.complete)
        }
        #expect(caster.requests.allSatisfy { $0.hasPrefix("GET / HTTP/1.") })
    }
}
