import Foundation
import GatewayCore
import Testing
@testable import Filters

/// Metres per degree of latitude near 30° N, close enough for offsets far from any threshold.
let metresPerDegree = 110_852.0

/// A scripted fix: `t` seconds after a fixed start, `north` metres north of a fixed point.
func fix(_ t: Double?, north: Double = 0, device: String = "a", event: FenceEvent.Kind? = nil) -> Position {
    Position(time: t.map { Timestamp(milliseconds: 1_700_000_000_000 + Int64(($0 * 1000).rounded())) },
             latitude: 30 + north / metresPerDegree, longitude: 120, mode: .threeD,
             source: "rx", device: device, id: "\(device)-\(t ?? -1)-\(north)",
             event: event.map { FenceEvent(kind: $0, fenceId: "park") })
}

/// Runs positions through a transform; returns the indices of the ones that came out.
func passedIndices(_ transform: inout some PositionTransform, _ positions: [Position]) -> [Int] {
    var out: [Position] = []
    for p in positions { transform.process(p, into: &out) }
    return out.map { o in positions.firstIndex(where: { $0.id == o.id }) ?? -1 }
}

/// Reads one component's options as the pipeline does.
func configure<P: GatewayPlugin>(_ plugin: P.Type, _ json: String, environment: [String: String] = [:]) throws -> (P.Configuration, [String]) {
    guard case .object(let object) = try JSONValue.parse(string: json) else { throw CancellationError() }
    let diagnostics = ConfigurationDiagnostics()
    var reader = OptionReader(object: object, path: "transforms.t", diagnostics: diagnostics, environment: environment)
    reader.markKnown(["type", "inputs", "description"])
    let c = P.configure(&reader)
    reader.finish()
    return (c, diagnostics.problems.map(\.description))
}

/// The option names of the table under `### <type>` in a README, in order.
func readmeOptionNames(folder: String, type: String?) throws -> [String] {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Plugins/\(folder)/README.md").standardized
    let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var i = 0
    if let type {
        guard let h = lines.firstIndex(of: "### \(type)") else { return ["<no heading ### \(type)>"] }
        i = h + 1
    }
    while i < lines.count, !lines[i].hasPrefix("| option") { i += 1 }
    i += 2 // header and separator
    var names: [String] = []
    while i < lines.count, lines[i].hasPrefix("|") {
        let cell = lines[i].replacingOccurrences(of: "\\|", with: "/").split(separator: "|", omittingEmptySubsequences: false)[1].trimmingCharacters(in: .whitespaces)
        names.append(cell.replacingOccurrences(of: "`", with: ""))
        i += 1
    }
    return names
}
