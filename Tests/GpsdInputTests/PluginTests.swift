import Foundation
import GatewayCore
@testable import GpsdInput
import Testing

@Suite struct PluginTests {
    static func configure(_ json: String) throws -> (GpsdSourceConfiguration, [ConfigurationProblem], [String]) {
        guard let object = try JSONValue.parse(string: json).objectValue else { throw GpsdReportError(description: "not an object") }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "sources.gps", diagnostics: diagnostics)
        reader.markKnown(["type"])
        let c = GpsdSourcePlugin.configure(&reader)
        reader.finish()
        return (c, diagnostics.problems, reader.askedKeys)
    }

    @Test func defaultsAreAsDocumented() throws {
        let (c, problems, asked) = try Self.configure(#"{"type":"gpsd"}"#)
        #expect(problems.isEmpty)
        #expect(c.host == "127.0.0.1" && c.port == 2947 && c.device == nil && c.mode == .json)
        #expect(c.stallTimeout == .seconds(10) && c.reconnectMax == .seconds(5) && c.idleFlush == .seconds(1))
        // Every documented option is read, and nothing else (nested members are documented as dotted rows).
        #expect(asked == GpsdSourcePlugin.info.options.map(\.name).filter { !$0.contains(".") })
        #expect(c.health == nil && c.dutyCycle == nil)
    }

    @Test func theSampleConfigurationIsValid() throws {
        let (_, problems, _) = try Self.configure(GpsdSourcePlugin.info.sample)
        #expect(problems.isEmpty)
    }

    @Test func badValuesAreReportedWithTheirPaths() throws {
        let (_, problems, _) = try Self.configure(#"{"type":"gpsd","port":70000,"mode":"xml","stall_timeout":"1s","idle_flush":"2s","hots":"x"}"#)
        let paths = Set(problems.map(\.path))
        #expect(paths == ["sources.gps.port", "sources.gps.mode", "sources.gps.idle_flush", "sources.gps.hots"])
    }

    @Test func watchCommandNamesTheDevice() {
        var c = GpsdSourceConfiguration()
        c.device = "/dev/ttyACM0"
        let source = GpsdPositionSource(configuration: c, context: TestSupport.context())
        #expect(source.watchCommand == "?WATCH={\"enable\":true,\"json\":true,\"device\":\"/dev/ttyACM0\"};\n")
    }

    @Test func readmeDocumentsEveryOptionInOrder() throws {
        let readme = try String(contentsOf: TestSupport.packageRoot.appendingPathComponent("Plugins/GpsdInput/README.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `") }.compactMap { row -> String? in
            guard let start = row.firstIndex(of: "`") else { return nil }
            let rest = row[row.index(after: start)...]
            return rest.firstIndex(of: "`").map { String(rest[..<$0]) }
        }
        #expect(rows == GpsdSourcePlugin.info.options.map(\.name))
        #expect(readme.contains(GpsdSourcePlugin.info.sample))
        #expect(readme.contains("## Troubleshooting"))
    }
}
