import Foundation
import GatewayCore
import GatewayTesting
import Testing
import TrackMap

/// `locgate map` reads with the plugins of the registry it is given, as a pipeline does.
@Suite struct MapRegistryTests {
    let logger = Logger(label: "map", handler: SilentLogHandler())

    @Test func aFileNameThatLooksLikeAnEnvironmentVariableIsReadAsWritten() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/drive-${HOME}.log"
        try FileManager.default.copyItem(atPath: boatLog, toPath: path)
        let data = try embeddedData(try await mapPage([path]))
        #expect(data["tracks"]?.arrayValue?.first?["name"]?.stringValue == "drive-${HOME}.log")
    }

    @Test func aRegistryWithoutTheFilePluginRefusesInputsByName() async throws {
        let error = await #expect(throws: TrackMapError.self) {
            _ = try await MapCommand.page([boatLog], registry: PluginRegistry(), logger: logger)
        }
        #expect(error?.description == "\(boatLog): type: no source plugin \"file\" in this binary")
    }
}
