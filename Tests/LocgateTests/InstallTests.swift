import Foundation
import GatewayTesting
import Testing

/// `make install` with the already built binary, staged under a temporary DESTDIR.
@Suite struct InstallTests {
    /// Runs a program to its end (looked up in PATH unless a path), in the package root.
    func run(_ arguments: [String]) throws -> Program.Result {
        try Program.run("/usr/bin/env", arguments, in: LocgateBinary.packageRoot)
    }

    func install(into destdir: String) throws -> Program.Result {
        try run(["make", "-s", "install", "DESTDIR=\(destdir)", "PREFIX=/usr", "BINARY=\(try LocgateBinary.path())"])
    }

    func mode(_ path: String) -> mode_t? {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : nil
    }

    @Test(.timeLimit(.minutes(1))) func installLaysOutBinaryUnitUserConfigAndDocs() throws {
        let destdir = try makeTemporaryDirectoryURL().path
        let r = try install(into: destdir)
        #expect(r.status == 0, "\(r.output)")
        let expected: [(String, mode_t)] = [
            ("/usr/bin/locgate", 0o755),
            ("/usr/lib/systemd/system/locgate.service", 0o644),
            ("/usr/lib/sysusers.d/locgate.conf", 0o644),
            ("/etc/locgate/pipeline.json", 0o644),
            ("/usr/share/doc/locgate/README.md", 0o644),
            ("/usr/share/doc/locgate/Operations.md", 0o644),
        ]
        for (path, m) in expected { #expect(mode(destdir + path) == m, "\(path)") }
        let unit = try String(contentsOfFile: destdir + "/usr/lib/systemd/system/locgate.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=/usr/bin/locgate run /etc/locgate/pipeline.json\n"))
        #expect(!unit.contains("@BINDIR@") && !unit.contains("@DOCDIR@"), "a placeholder was left: \(unit)")
        // What the service relies on: notify + watchdog, reload by SIGHUP, owner-only files, serial access.
        for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=30s", "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID",
                     "UMask=0077", "User=locgate", "SupplementaryGroups=dialout", "StateDirectory=locgate", "ProtectSystem=strict",
                     "DeviceAllow=char-ttyACM rw", "DeviceAllow=char-ttyUSB rw", "MemoryDenyWriteExecute=yes"] {
            #expect(unit.contains("\n\(line)\n"), "\(line)")
        }
        let sysusers = try String(contentsOfFile: destdir + "/usr/lib/sysusers.d/locgate.conf", encoding: .utf8)
        #expect(sysusers.contains("\nu locgate - ") && sysusers.contains("\nm locgate dialout\n"))
        let version = try run([destdir + "/usr/bin/locgate", "version"])
        #expect(version.output.hasPrefix("locgate "))

        // An operator's pipeline survives a second install.
        try Data("{}".utf8).write(to: URL(fileURLWithPath: destdir + "/etc/locgate/pipeline.json"))
        #expect(try install(into: destdir).status == 0)
        #expect(try String(contentsOfFile: destdir + "/etc/locgate/pipeline.json", encoding: .utf8) == "{}")
    }

    @Test(.timeLimit(.minutes(1))) func theDefaultPipelineValidates() throws {
        let dir = try makeTemporaryDirectoryURL()
        let shipped = try String(contentsOf: LocgateBinary.packageRoot.appendingPathComponent("Packaging/pipeline.json"), encoding: .utf8)
        // The state directory exists only on an installed system: the test's directory stands in.
        try Data(shipped.replacingOccurrences(of: "/var/lib/locgate", with: dir.path).utf8).write(to: dir.appendingPathComponent("pipeline.json"))
        let r = try LocgateBinary.run(["validate", dir.path + "/pipeline.json"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    static let systemdAnalyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.timeLimit(.minutes(1)), .enabled(if: systemdAnalyze != nil, "systemd-analyze is not installed"))
    func theInstalledUnitPassesSystemdAnalyzeVerify() throws {
        let destdir = try makeTemporaryDirectoryURL().path
        #expect(try install(into: destdir).status == 0)
        // verify checks that ExecStart's binary exists: point it at the staged copy.
        let unit = try String(contentsOfFile: destdir + "/usr/lib/systemd/system/locgate.service", encoding: .utf8)
            .replacingOccurrences(of: "ExecStart=/usr/bin/locgate", with: "ExecStart=\(destdir)/usr/bin/locgate")
        let copy = destdir + "/locgate.service"
        try Data(unit.utf8).write(to: URL(fileURLWithPath: copy))
        let r = try run([try #require(InstallTests.systemdAnalyze), "verify", copy])
        #expect(r.status == 0, "\(r.output)")
        // Unknown keys and bad values are only warnings: the output must be empty too.
        #expect(r.output.isEmpty, "\(r.output)")
    }
}
