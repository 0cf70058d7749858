// `locgate validate` and `locgate run` on a hostile pipeline file: the JSON parser, every
// built-in plugin's `configure`, `${…}` substitution and the graph checks. The input is the
// file, whole. Nothing is built or started (no socket, file or device is touched).
//
// Checks: a file either loads (with at least one source and one sink) or is rejected with
// problems that each name a JSON path and say something.
import PluginCatalog
import FuzzSupport
import GatewayCore

/// Variables a `${NAME}` in the input may find, set and empty; anything else is unset.
let environment = ["LOCGATE_HOST": "127.0.0.1", "LOCGATE_PORT": "2947", "LOCGATE_TOKEN": "fuzz-token", "EMPTY": ""]

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    do {
        let configuration = try PipelineConfiguration.load(
            json: input, registry: BuiltinPlugins.registry, environment: environment, baseDirectory: "/nonexistent/locgate-fuzz")
        fuzzCheck(!configuration.sources.isEmpty && !configuration.sinks.isEmpty, "configuration: loaded without a source or a sink")
        for component in configuration.components {
            fuzzCheck(!component.id.isEmpty, "configuration: loaded a component without an id")
        }
    } catch {
        fuzzCheck(!error.problems.isEmpty, "configuration: rejected without a problem")
        for problem in error.problems {
            fuzzCheck(!problem.path.isEmpty && !problem.message.isEmpty, "configuration: problem without a path or a message: \(problem)")
        }
        _ = error.description
    }
    return 0
}

FuzzDriver.run(testOneInput)
