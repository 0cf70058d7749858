import PluginCatalog
import Foundation
import GatewayCore
import Testing

/// Docs/Operations.md cannot rot: its samples load, and it names every option and fixed metric family.
@Suite struct DocumentationTests {
    let page: String

    init() throws {
        page = try String(contentsOfFile: "\(packageRoot)/Docs/Operations.md", encoding: .utf8)
    }

    /// The ```json blocks of the page that are whole pipelines.
    var pipelines: [String] {
        page.components(separatedBy: "```json\n").dropFirst().compactMap { $0.components(separatedBy: "```").first }
            .filter { $0.contains("\"sources\"") }
    }

    @Test func everySamplePipelineLoadsWithItsAPI() throws {
        #expect(pipelines.count == 2)
        for json in pipelines {
            let c = try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry,
                                                   environment: ["LOCGATE_API_TOKEN": "t"])
            #expect(c.api != nil)
        }
    }

    @Test func everyOptionAndFixedFamilyIsDocumented() {
        for option in ["listen", "token", "tls.cert_file", "tls.key_file", "health.source_stall", "health.max_queue_age", "map.tail", "map.datum",
                       "limits.connections", "limits.per_address"] {
            #expect(page.contains("| `\(option)` |"), "\(option)")
        }
        for family in ["locgate_build_info", "locgate_start_time_seconds", "locgate_component_received_positions_total",
                       "locgate_component_emitted_positions_total", "locgate_component_dropped_positions_total",
                       "locgate_device_last_fix_age_seconds", "locgate_api_connections_open", "locgate_api_connections_refused_total"] {
            #expect(page.contains("| `\(family)` |"), "\(family)")
        }
    }
}
