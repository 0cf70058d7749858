import Foundation
import GatewayTesting
import Testing

/// Examples/CustomBuild, a separate package that depends on this one by path and adds a source
/// plugin, builds, and its binary runs the extra plugin beside every built-in one. The build is a
/// whole second build of the package, which took over 15 minutes on a loaded 2-core machine:
/// the limit is there to catch a build that hangs, not a slow one.
@Suite(.serialized, .timeLimit(.minutes(30)))
struct CustomBuildTests {
    @Test func anOutOfTreePackageBuildsItsOwnBinaryWithAnExtraPlugin() throws {
        let example = LocgateBinary.packageRoot.appendingPathComponent("Examples/CustomBuild").path
        let log = NSTemporaryDirectory() + "locgate-custom-build-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        // SwiftPM keeps the build description of an earlier build of the example, and with it
        // this package's (a path dependency's) list of source files: a file added here since is
        // missing until it is thrown away ("cannot find type" on the first build after).
        #expect(Tmpfs.sh("cd '\(example)' && rm -f .build/debug/description.json && swift build --product locgate-custom > '\(log)' 2>&1") == 0,
                "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let binary = example + "/.build/debug/locgate-custom"

        let plugins = try Program.run(binary, ["plugins"])
        #expect(plugins.status == 0)
        #expect(plugins.stdout.contains("source beacon — "))
        #expect(plugins.stdout.contains("source serial — "), "the built-in plugins are all there")

        let dir = try makeTemporaryDirectoryURL()
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("beacon.json")
        try #"{"sources":{"b":{"type":"beacon","lat":31.2304,"lon":121.4737,"interval":"10ms","count":2}},"sinks":{"o":{"type":"stdout","inputs":["b"],"format":"jsonl"}}}"#
            .write(to: config, atomically: true, encoding: .utf8)
        let r = try Program.run(binary, ["run", config.path])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.contains(#""lat":31.2304,"lon":121.4737"#) && $0.contains(#""device":"beacon""#) })
    }
}
