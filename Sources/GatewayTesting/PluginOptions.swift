import GatewayCore

/// Reads a plugin's options from JSON text the way a pipeline configuration does, for tests of
/// `configure` and for building a source under test.
public enum PluginOptions {
    /// Why the JSON text could not be read as an object.
    public struct NotAnObject: Error, CustomStringConvertible {
        public var description: String
    }

    /// The configuration `configure` made from `json` (an object with or without `"type"`), and
    /// every problem reported, with paths under `path`.
    public static func read<P: GatewayPlugin>(
        _ plugin: P.Type, _ json: String, path: String = "sources.under_test",
        environment: [String: String] = [:], baseDirectory: String = "."
    ) throws -> (configuration: P.Configuration, problems: [ConfigurationProblem]) {
        let value: JSONValue
        do { value = try JSONValue.parse(string: json) } catch { throw NotAnObject(description: "\(error)") }
        guard case .object(let object) = value else { throw NotAnObject(description: "expected a JSON object, got \(value.kindName)") }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: path, diagnostics: diagnostics, environment: environment, baseDirectory: baseDirectory)
        reader.markKnown(PipelineConfiguration.commonKeys)
        let configuration = P.configure(&reader)
        reader.finish()
        return (configuration, diagnostics.problems)
    }

    /// The configuration made from `json`; throws when any problem was reported.
    public static func valid<P: GatewayPlugin>(_ plugin: P.Type, _ json: String, path: String = "sources.under_test",
                                               environment: [String: String] = [:], baseDirectory: String = ".") throws -> P.Configuration {
        let (c, problems) = try read(plugin, json, path: path, environment: environment, baseDirectory: baseDirectory)
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return c
    }
}
