import GatewayCore
@testable import NATSState
import Testing

@Suite struct StateKeysTests {
    @Test(arguments: ["van-1", "", "a.b", "=", "=3D", "owntracks/anna/phone", "+4917612345678", "imei 3548", "Zürich→Bern", "..", "a\\b", "*", ">"])
    func everyDeviceIdMakesAValidKeyThatReadsBackUnchanged(device: String) throws {
        let key = StateKeys.key(transform: "depot", device: device)
        // nats.c's validKey: [-/_=.a-zA-Z0-9], no empty token, no leading or trailing dot.
        #expect(key.utf8.allSatisfy { b in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || Array("-/_=.".utf8).contains(b)
        }, "\(key)")
        #expect(!key.split(separator: ".", omittingEmptySubsequences: false).contains { $0.isEmpty })
        let parts = try #require(StateKeys.parts(of: key))
        #expect(parts.transform == "depot")
        #expect(parts.device == device)
    }

    @Test func keysOfOtherTransformsOrNotMadeHereAreNotRead() {
        #expect(StateKeys.parts(of: "depot.a.b") == nil)
        #expect(StateKeys.parts(of: "depot.=Z1") == nil)
        #expect(StateKeys.filter(transform: "depot") == "depot.>")
    }
}

@Suite struct NATSStateSettingsTests {
    static func read(_ json: String) -> (StateSettings, [ConfigurationProblem]) {
        var registry = PluginRegistry()
        registry.register(stateBackend: NATSStateBackend.self)
        let diagnostics = ConfigurationDiagnostics()
        guard case .object(let o)? = try? JSONValue.parse(string: json) else { return (StateSettings(), []) }
        var reader = OptionReader(object: o, path: "settings", diagnostics: diagnostics)
        let settings = StateSettings.read(&reader, registry: registry)
        return (settings, diagnostics.problems)
    }

    @Test func natsOptionsSelectTheKeyValueBackend() throws {
        let (settings, problems) = Self.read(#"{"state": {"nats": {"servers": ["nats://127.0.0.1:4222"], "bucket": "fleet-state", "replicas": 3}, "max_age": "7d"}}"#)
        #expect(problems.isEmpty, "\(problems)")
        let backend = try #require(settings.backend)
        #expect(backend.key == "nats")
        #expect(backend.location == "nats bucket fleet-state")
        let c = try #require(backend.configuration as? NATSStateConfiguration)
        #expect(c.bucket == "fleet-state")
        #expect(c.replicas == 3)
        #expect(c.connection.servers == ["nats://127.0.0.1:4222"])
        #expect(settings.maxAge == .seconds(7 * 86_400))
    }

    @Test func pathAndNatsTogetherAreReportedAtBothPaths() {
        let (_, problems) = Self.read(#"{"state": {"path": "/tmp/s.db", "nats": {"servers": ["nats://127.0.0.1:4222"]}}}"#)
        #expect(Set(problems.map(\.path)) == ["settings.state.path", "settings.state.nats"], "\(problems)")
    }

    @Test func badNatsOptionsAreReportedWithTheirPaths() {
        let (_, problems) = Self.read(#"{"state": {"nats": {"servers": [], "bucket": "a.b", "replicas": 7, "buckets": 1}}}"#)
        #expect(Set(problems.map(\.path)) == ["settings.state.nats.servers", "settings.state.nats.bucket", "settings.state.nats.replicas", "settings.state.nats.buckets"], "\(problems)")
    }

    @Test func aChangedBackendIsADifferentSetting() {
        let a = Self.read(#"{"state": {"nats": {"servers": ["nats://127.0.0.1:4222"]}}}"#).0
        let b = Self.read(#"{"state": {"nats": {"servers": ["nats://127.0.0.1:4222"], "bucket": "other"}}}"#).0
        let c = Self.read(#"{"state": {"nats": {"servers": ["nats://127.0.0.1:4222"]}}}"#).0
        #expect(a != b)
        #expect(a == c)
    }
}
