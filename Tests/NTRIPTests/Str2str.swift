import Foundation
import GatewayTesting
#if canImport(Glibc)
import Glibc
#endif

/// RTKLIB's `str2str` as an NTRIP 1 caster on loopback: it serves mountpoint `MOUNT` on
/// `casterPort` to `user`:`password`, relaying what the test writes into its input server on
/// `inputPort`.
final class Str2strCaster {
    let casterPort: Int
    let inputPort: Int
    private let process = Process()

    init(user: String = "rover", password: String = "secret") throws {
        casterPort = LoopbackTCPServer.freePort()
        inputPort = LoopbackTCPServer.freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/str2str")
        process.arguments = ["-in", "tcpsvr://:\(inputPort)", "-out", "ntripc://\(user):\(password)@:\(casterPort)/MOUNT:locgate-test"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
    }

    /// Starts it and waits until both ports accept connections.
    func start() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/str2str") else {
            throw PeerError(description: "str2str is missing: apt-get install rtklib (make test installs it)")
        }
        try process.run()
        for port in [casterPort, inputPort] {
            let up = await Poll.until(timeout: .seconds(10)) { Self.accepts(port) }
            guard up else { throw PeerError(description: "str2str did not listen on \(port)") }
        }
    }

    static func accepts(_ port: Int) -> Bool {
        // A connection that is opened and closed at once: str2str takes it as a client that left.
        (try? LoopbackTCPClient(port: port)).map { $0.close(); return true } ?? false
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}
