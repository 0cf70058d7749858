import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import MQTTOutput
import Testing

/// The package root, found from this file's path.
let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The mqtt sink under test, in this process.
typealias Harness = SinkHarness<MQTTSinkPlugin>

/// The options of the sink `sinks.up`; any problem throws.
func configuration(_ json: String) throws -> MQTTSinkConfiguration {
    try PluginOptions.valid(MQTTSinkPlugin.self, json, path: "sinks.up")
}

/// The `id` of a JSON position payload.
func positionID(_ payload: String) -> String? {
    (try? JSONValue.parse(string: payload))?["id"]?.stringValue
}

