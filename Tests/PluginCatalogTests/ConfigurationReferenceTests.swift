import PluginCatalog
import Foundation
import GatewayCore
import Testing

/// The option tables of the configuration reference are held to the declarations, as the plugin
/// READMEs are (``BuiltinPluginsTests``): `settings` in Docs/Configuration.md, `api` in
/// Docs/Operations.md.
@Suite struct ConfigurationReferenceTests {
    /// The first option table after `heading` in `document`, as "name = default" rows.
    static func table(_ document: String, after heading: String) throws -> [String] {
        let text = try String(contentsOfFile: "\(packageRoot)/\(document)", encoding: .utf8)
        let section = try #require(text.range(of: heading), "\(document) has no \(heading)")
        return try #require(optionTables(in: String(text[section.upperBound...])).first, "\(document) has no option table after \(heading)")
    }

    static func row(_ spec: OptionSpec) -> String {
        "\(spec.name) = \(spec.required ? "required" : spec.defaultValue ?? "none")"
    }

    @Test func theSettingsTableGivesEveryDeclaredDefault() throws {
        let specs = PipelineConfiguration.Settings.options(registry: BuiltinPlugins.registry)
        let rows = try Self.table("Docs/Configuration.md", after: "## Settings")
        // Every option of settings itself and of the state store has its row; a state backend's
        // connection options are documented with the plugin that shares them, so of those the
        // table may list a few, each with the declared default.
        let own = specs.filter { !$0.name.hasPrefix("state.nats.") }.map(Self.row)
        #expect(own.filter { !rows.contains($0) } == [], "rows of Docs/Configuration.md: \(rows)")
        let declared = Set(specs.map(Self.row))
        #expect(rows.filter { !declared.contains($0) } == [], "declared: \(declared.sorted())")
    }

    @Test func theAPITableGivesEveryDeclaredDefault() throws {
        let rows = try Self.table("Docs/Operations.md", after: "### Options")
        #expect(rows == PipelineConfiguration.API.options.map(Self.row))
    }
}
