import Foundation
import GatewayTesting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `locgate ntrip sourcetable URL` against RTKLIB's str2str as an NTRIP caster on loopback.
@Suite(.serialized, .timeLimit(.minutes(1))) struct NTRIPCLITests {
    @Test func theSourcetableOfACasterIsListed() async throws {
        let port = LoopbackTCPServer.freePort(), input = LoopbackTCPServer.freePort()
        let caster = Process()
        caster.executableURL = URL(fileURLWithPath: "/usr/bin/str2str")
        caster.arguments = ["-in", "tcpsvr://:\(input)", "-out", "ntripc://rover:secret@:\(port)/VRS_TEST:Vienna"]
        caster.standardOutput = FileHandle.nullDevice
        caster.standardError = FileHandle.nullDevice
        try caster.run()
        defer { kill(caster.processIdentifier, SIGKILL); caster.waitUntilExit() }
        #expect(await Poll.until(timeout: .seconds(10)) { (try? LoopbackTCPClient(port: port)).map { $0.close(); return true } ?? false })
        for version in ["1", "2"] {
            let result = try Program.run(try LocgateBinary.path(), ["ntrip", "sourcetable", "ntrip://127.0.0.1:\(port)", "--ntrip-version", version])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.hasPrefix("MOUNTPOINT"), "\(result.stdout)")
            #expect(result.stdout.contains("VRS_TEST") && result.stdout.contains("Vienna") && result.stdout.contains("1 mountpoint\n"), "\(result.stdout)")
        }
        let raw = try Program.run(try LocgateBinary.path(), ["ntrip", "sourcetable", "ntrip://127.0.0.1:\(port)", "--raw"])
        #expect(raw.stdout.contains("STR;VRS_TEST;Vienna") && raw.stdout.contains("ENDSOURCETABLE"), "\(raw.stdout)")
        let bad = try Program.run(try LocgateBinary.path(), ["ntrip", "sourcetable", "https://127.0.0.1:\(port)"])
        #expect(bad.status == 2 && bad.stderr.contains("only ntrip:// and http://"), "\(bad.stderr)")
        let closed = try Program.run(try LocgateBinary.path(), ["ntrip", "sourcetable", "ntrip://127.0.0.1:\(LoopbackTCPServer.freePort())"])
        #expect(closed.status == 1 && closed.stderr.contains("Connection refused"), "\(closed.stderr)")
    }
}
