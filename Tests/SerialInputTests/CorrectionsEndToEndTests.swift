import Foundation
import GatewayCore
import GatewayTesting
import RTCM
import Testing
import UBX
#if canImport(Glibc)
import Glibc
#endif

/// The serial source with UBX and corrections, end to end: `locgate run` reads a simulated u-blox
/// receiver on a socat pseudo-terminal (with the shim) that sends NAV-PVT at 10 Hz, configures it
/// with a CFG-VALSET the receiver acknowledges, and writes the corrections of RTKLIB's str2str
/// (an NTRIP 1 caster on loopback) into the same port.
@Suite(.serialized, .timeLimit(.minutes(2))) struct CorrectionsEndToEndTests {
    /// A NAV-PVT of epoch `i`: 3D RTK-float fix, 10 Hz from 2026-03-01T12:00:00Z, latitude growing.
    static func navPVT(_ i: Int) -> [UInt8] {
        var p = [UInt8](repeating: 0, count: 92)
        func put<T: FixedWidthInteger>(_ v: T, _ o: Int) { withUnsafeBytes(of: v.littleEndian) { for (k, b) in $0.enumerated() { p[o + k] = b } } }
        put(UInt16(2026), 4); p[6] = 3; p[7] = 1; p[8] = 12; p[9] = UInt8(i / 600 % 60); p[10] = UInt8(i / 10 % 60)
        p[11] = 0x03
        put(Int32(i % 10) * 100_000_000, 16)
        p[20] = 3; p[21] = 0x01 | 0x02 | 0x40; p[23] = 20
        put(Int32(163_700_000), 24); put(Int32(482_000_000 + i), 28)
        put(Int32(225_000), 32); put(Int32(180_000), 36); put(UInt32(20), 40); put(UInt32(30), 44)
        return UBXFrame.encode(.navPVT, payload: p)
    }

    @Test func theCastersFramesReachThePortExactlyAndInOrderWhileNavPVTDecodingStaysComplete() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/str2str") else {
            Issue.record("str2str is missing: apt-get install rtklib (make test installs it)")
            return
        }
        // The base station's stream: gpsd's rtcm3.2 capture (its junk included), and its good frames.
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ReceiverStreamTests/Fixtures/rtcm/rtcm3.2.log")
        let file = Array(try Data(contentsOf: fixtures))
        let body = Array(file[(file.firstIndex(of: 0xD3) ?? 0)...])
        var framer = RTCMStreamFramer()
        var frames: [[UInt8]] = []
        body.withUnsafeBytes { framer.feed($0) { frames.append(Array($0)) } }
        #expect(frames.count == 192)

        let casterPort = LoopbackTCPServer.freePort(), inputPort = LoopbackTCPServer.freePort()
        let caster = Process()
        caster.executableURL = URL(fileURLWithPath: "/usr/bin/str2str")
        caster.arguments = ["-in", "tcpsvr://:\(inputPort)", "-out", "ntripc://rover:secret@:\(casterPort)/MOUNT:test"]
        caster.standardOutput = FileHandle.nullDevice
        caster.standardError = FileHandle.nullDevice
        try caster.run()
        defer { kill(caster.processIdentifier, SIGKILL); caster.waitUntilExit() }

        let dir = ScratchDirectory()
        let pty = PtyPair(directory: dir.path)
        try await pty.start()
        let out = dir.path + "/out.jsonl"
        let extra = """
        "init": [{"valset": {"CFG-RATE-MEAS": 100, "CFG-USBINPROT-RTCM3X": true}}],
        "corrections": {"url": "ntrip://rover:secret@127.0.0.1:\(casterPort)/MOUNT", "version": 1, "gga": "never"}
        """
        let locgate = try LocgateProcess(config: serialConfig(port: pty.reader, output: out, extra: extra), directory: dir.path)
        defer { locgate.stop(); pty.stop() }

        let valset = UBXFrame.encode(.cfgValset, payload: [0, 1, 0, 0, 0x01, 0x00, 0x21, 0x30, 100, 0, 0x04, 0x00, 0x77, 0x10, 1])
        var received: [UInt8] = []
        var acknowledged = false
        var input: LoopbackTCPClient?
        var sent = 0
        var epochs = 0
        let start = ContinuousClock.now
        // The receiver at 10 Hz: a NAV-PVT every 100 ms; it answers the CFG-VALSET when it sees it;
        // once locgate is connected to the caster, the base station sends 2 KB per tick.
        while ContinuousClock.now - start < .seconds(60) {
            pty.write(Self.navPVT(epochs))
            epochs += 1
            received += pty.readAvailable()
            if !acknowledged && received.count >= valset.count {
                #expect(Array(received.prefix(valset.count)) == valset, "the first bytes on the port are the configured CFG-VALSET")
                pty.write(UBXFrame.encode(.ackAck, payload: [0x06, 0x8A]))
                acknowledged = true
            }
            if input == nil && acknowledged && locgate.count("ACK-ACK") == 1 && locgate.count("ntrip 127.0.0.1:\(casterPort)/MOUNT: connected") == 1 {
                input = try LoopbackTCPClient(port: inputPort)
            }
            if let input, sent < body.count {
                let n = min(2048, body.count - sent)
                #expect(input.send(Array(body[sent..<(sent + n)])))
                sent += n
            }
            let expected = valset.count + frames.reduce(0) { $0 + $1.count }
            if sent == body.count && received.count >= expected { break }
            try await Task.sleep(until: start + .milliseconds(100 * epochs), clock: .continuous)
        }
        input?.close()
        #expect(acknowledged && sent == body.count, "log: \(locgate.log)")
        let corrections = Array(received.dropFirst(valset.count))
        #expect(corrections == frames.flatMap { $0 }, "the bytes written to the port are the caster's frames, whole, in order, none foreign (\(corrections.count) bytes)")
        // NAV-PVT decoding from the same port stayed complete: every epoch is a position.
        #expect(await Poll.until { readPositions(out).count == epochs }, "\(readPositions(out).count) of \(epochs) epochs; log: \(locgate.log)")
        #expect(locgate.log.contains("init[0]: CFG-VALSET (ram) CFG-RATE-MEAS=100, CFG-USBINPROT-RTCM3X=true: ACK-ACK"))
        let statuses = (try? String(contentsOfFile: out, encoding: .utf8))?.components(separatedBy: "\"status\":4").count ?? 0
        #expect(statuses - 1 == epochs, "RTK float from NAV-PVT (carrSoln 1) on every position")
    }
}
