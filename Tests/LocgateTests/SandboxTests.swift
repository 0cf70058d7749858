import Foundation
import GatewayTesting
import Testing

/// The unit's `MemoryDenyWriteExecute=yes`, tried without systemd: the kernel's per-process
/// equivalent (`prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN)`, Linux 6.3+) refuses the same
/// mappings and is kept across exec, so a wrapper sets it and execs the binary.
@Suite struct SandboxTests {
    /// Sets MDWE (prctl 65, flag 1) and execs its arguments; exits 97 when the kernel lacks it.
    static let wrapper = "import ctypes, os, sys\nif ctypes.CDLL(None).prctl(65, 1, 0, 0, 0) != 0: sys.exit(97)\nos.execv(sys.argv[1], sys.argv[1:])"

    static func underMDWE(_ arguments: [String]) throws -> Program.Result {
        try Program.run("/usr/bin/env", ["python3", "-c", wrapper] + arguments)
    }

    static let kernelHasMDWE = (try? underMDWE(["/bin/true"]).status) == 0

    @Test(.timeLimit(.minutes(1)), .enabled(if: kernelHasMDWE, "the kernel has no PR_SET_MDWE (Linux 6.3+)"))
    func aPipelineRunsWhereNoMemoryMayBeWritableAndExecutable() throws {
        // The control: under the wrapper a writable+executable mapping is refused.
        let control = try SandboxTests.underMDWE(["/usr/bin/python3", "-c",
            "import mmap\ntry:\n    mmap.mmap(-1, 4096, prot=7)\n    print('mapped')\nexcept OSError:\n    print('refused')"])
        #expect(control.output == "refused\n", "\(control.output)")

        let dir = try makeTemporaryDirectoryURL()
        try NMEASamples.writeLog(epochs: 30, to: dir.path + "/track.nmea")
        let port = LoopbackTCPServer.freePort()
        // File replay, a transform, a file sink and an http sink with an SQLite queue: libcurl,
        // OpenSSL, SQLite and PROJ-free Swift code all load and run.
        let config = #"""
        { "settings": { "stats_interval": false, "shutdown_timeout": "500ms" },
          "sources": { "rx": { "type": "file", "path": "track.nmea" } },
          "transforms": { "moving": { "type": "distance_filter", "inputs": ["rx"], "min_distance_m": 1 } },
          "sinks": { "out": { "type": "file", "inputs": ["moving"], "path": "out.jsonl" },
                     "up": { "type": "http", "inputs": ["rx"], "url": "https://127.0.0.1:\#(port)/t", "queue": { "path": "q.sqlite" } } } }
        """#
        try Data(config.utf8).write(to: dir.appendingPathComponent("p.json"))
        let r = try SandboxTests.underMDWE([try LocgateBinary.path(), "run", dir.path + "/p.json"])
        #expect(r.status == 0, "\(r.output)")
        let lines = try String(contentsOf: dir.appendingPathComponent("out.jsonl"), encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 30)
    }
}
