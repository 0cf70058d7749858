import PluginCatalog
import Foundation
import GatewayCore
import GatewayTesting
import HTTPServing
@testable import OperatorEndpoints
import Testing

/// The top-level `api` key, read like `settings`: every problem with its JSON path.
@Suite struct ConfigurationTests {
    func load(_ api: String, environment: [String: String] = [:]) -> (PipelineConfiguration.API?, [String]) {
        let json = """
        { "api": \(api),
          "sources": { "rx": { "type": "file", "path": "a.nmea" } },
          "sinks": { "out": { "type": "stdout", "inputs": ["rx"] } } }
        """
        do {
            let c = try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry, environment: environment, baseDirectory: "/etc/locgate")
            return (c.api, [])
        } catch {
            return (nil, error.problems.map(\.description))
        }
    }

    @Test func theAPIIsOffWithoutTheKeyAndOnWithDefaults() throws {
        let off = try PipelineConfiguration.load(json: Array(#"{"sources":{"rx":{"type":"file","path":"a"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#.utf8),
                                                 registry: BuiltinPlugins.registry)
        #expect(off.api == nil)
        let (api, problems) = load("{}")
        #expect(problems.isEmpty)
        #expect(api == PipelineConfiguration.API(host: "127.0.0.1", port: 9425, sourceStall: .seconds(60), maxQueueAge: .seconds(600)))
    }

    @Test func everyOptionIsRead() {
        let (api, problems) = load("""
        { "listen": "[::1]:9500", "token": "${TOKEN}", "tls": { "cert_file": "api.pem", "key_file": "/keys/api.key" },
          "health": { "source_stall": "2m", "max_queue_age": "1h" } }
        """, environment: ["TOKEN": "abc123"])
        #expect(problems.isEmpty)
        #expect(api == PipelineConfiguration.API(host: "::1", port: 9500, token: "abc123", tls: ServerTLSOptions(certFile: "/etc/locgate/api.pem",
                                                 keyFile: "/keys/api.key"), sourceStall: .seconds(120), maxQueueAge: .seconds(3600)))
        #expect(api?.isLoopback == true)
        #expect(api?.listen == "[::1]:9500")
    }

    @Test(arguments: [
        ("127.0.0.1:9425", "127.0.0.1", true), ("127.1.2.3:80", "127.1.2.3", true), ("localhost:9425", "127.0.0.1", true),
        ("[::1]:9425", "::1", true), ("[::ffff:127.0.0.1]:9425", "::ffff:127.0.0.1", true),
        ("0.0.0.0:9425", "0.0.0.0", false), ("192.168.1.10:9425", "192.168.1.10", false), ("[::]:9425", "::", false),
    ])
    func listenAddressesAndWhetherTheyAreLoopback(listen: String, host: String, loopback: Bool) {
        let (api, _) = load(#"{"listen": "\#(listen)", "token": "t"}"#)
        #expect(api?.host == host)
        #expect(api?.isLoopback == loopback)
    }

    @Test func aNonLoopbackAddressWithoutATokenIsRefused() {
        let (_, problems) = load(#"{"listen": "0.0.0.0:9425"}"#)
        #expect(problems == ["api.token: required when listen is not a loopback address (0.0.0.0:9425): without it anyone who reaches the port reads every position"])
        #expect(load(#"{"listen": "0.0.0.0:9425", "token": "t0ken"}"#).1.isEmpty)
    }

    @Test func badValuesAreAllReportedWithTheirPaths() {
        let (_, problems) = load("""
        { "listen": "example.org:80", "tokn": "x", "tls": { "cert_file": "a.pem" },
          "health": { "source_stall": "soon", "max_queu_age": "1m" } }
        """)
        #expect(problems.contains(#"api.listen: expected an IP address and a port such as "127.0.0.1:9425" or "[::1]:9425", got "example.org:80""#))
        #expect(problems.contains { $0.hasPrefix(#"api.tokn: unknown option; did you mean "token"?"#) })
        #expect(problems.contains("api.tls.key_file: required option is missing"))
        #expect(problems.contains(#"api.health.source_stall: expected a duration such as "20s", got "soon""#))
        #expect(problems.contains { $0.hasPrefix(#"api.health.max_queu_age: unknown option; did you mean "max_queue_age"?"#) })
        #expect(problems.count == 5, "\(problems)")
    }

    @Test func theConnectionLimitsAreReadAndGoToTheServer() {
        let (defaults, _) = load("{}")
        #expect(defaults?.maxConnections == 4096)
        #expect(defaults?.maxConnectionsPerAddress == 0, "no per-address limit unless asked")
        let (api, problems) = load(#"{"limits": {"connections": 500, "per_address": 20}}"#)
        #expect(problems.isEmpty)
        let limits = api.map(OperatorAPI.serverLimits)
        #expect(limits == HTTPServer.Limits(connections: 500, connectionsPerAddress: 20, idleTimeout: .seconds(10),
                                            requestDeadline: .seconds(15), maximumBodySize: 256 * 1024))
        #expect(limits?.problems == [])
        let (_, bad) = load(#"{"limits": {"connections": 0, "per_address": -1, "per_adress": 2}}"#)
        #expect(bad.count == 3, "\(bad)")
        #expect(bad.contains { $0.hasPrefix("api.limits.connections: ") })
        #expect(bad.contains { $0.hasPrefix("api.limits.per_address: ") })
        #expect(bad.contains { $0.hasPrefix(#"api.limits.per_adress: unknown option; did you mean "per_address"?"#) })
    }

    @Test(arguments: ["127.0.0.1", "127.0.0.1:99999", "::1:9425", "127.0.0.1:+80", ":9425"])
    func malformedListenValuesAreRejected(listen: String) {
        let (_, problems) = load(#"{"listen": "\#(listen)"}"#)
        #expect(problems.first?.hasPrefix("api.listen: expected an IP address and a port") == true, "\(problems)")
    }

    @Test func aTokenMustBeSetPrintableAndNonEmpty() {
        #expect(load(#"{"token": "${NOPE}"}"#).1.first == "api.token: environment variable NOPE is not set (write ${NOPE:-default} for a default)")
        #expect(load(#"{"token": ""}"#).1 == ["api.token: must not be empty"])
        #expect(load(#"{"token": "two words"}"#).1 == ["api.token: must be printable ASCII without spaces (it travels in an HTTP header)"])
        #expect(load(#"{"listen": "0.0.0.0:1", "token": ""}"#).1 == ["api.token: must not be empty"])
    }

    @Test func aMistypedTopLevelKeySuggestsAPI() throws {
        let json = #"{"apii": {}, "sources":{"rx":{"type":"file","path":"a"}},"sinks":{"o":{"type":"stdout","inputs":["rx"]}}}"#
        #expect(throws: ConfigurationError.self) { try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry) }
        do {
            _ = try PipelineConfiguration.load(json: Array(json.utf8), registry: BuiltinPlugins.registry)
        } catch {
            #expect(error.problems.first?.description.hasPrefix(#"apii: unknown top-level key; did you mean "api"?"#) == true, "\(error)")
        }
    }

    @Test func theTokenIsComparedWholly() {
        #expect(OperatorAPI.authorized("Bearer abc", token: "abc"))
        #expect(OperatorAPI.authorized("bearer abc", token: "abc"))
        #expect(!OperatorAPI.authorized("Bearer ab", token: "abc"))
        #expect(!OperatorAPI.authorized("Bearer abcd", token: "abc"))
        #expect(!OperatorAPI.authorized("Bearer abd", token: "abc"))
        #expect(!OperatorAPI.authorized("abc", token: "abc"))
        #expect(!OperatorAPI.authorized(nil, token: "abc"))
        #expect(!OperatorAPI.authorized("Basic abc", token: "abc"))
    }

    @Test func statisticNamesFollowPrometheusConventions() {
        #expect(PrometheusExposition.metricName("nmea.bad_checksum", kind: .counter) == "locgate_nmea_bad_checksum_total")
        #expect(PrometheusExposition.metricName("queue.depth", kind: .gauge) == "locgate_queue_depth")
        #expect(PrometheusExposition.metricName("queue.oldest_age_s", kind: .gauge) == "locgate_queue_oldest_age_seconds")
        #expect(PrometheusExposition.metricName("events.enter", kind: .counter) == "locgate_events_enter_total")
        #expect(PrometheusExposition.metricName("dropped.hdop-x", kind: .counter) == "locgate_dropped_hdop_x_total")
    }
}

/// `api.map`: the live map's tail and display datum.
@Suite struct LiveMapConfigurationTests {
    func load(_ map: String) -> (PipelineConfiguration.API?, [String]) {
        ConfigurationTests().load(#"{"map": \#(map)}"#)
    }

    @Test func defaultsAndValues() {
        #expect(load("{}").0?.mapTail == 50)
        #expect(load("{}").0?.mapDatum == "wgs84")
        let (api, problems) = load(#"{"tail": 200, "datum": "bd09"}"#)
        #expect(problems.isEmpty)
        #expect(api?.mapTail == 200)
        #expect(api?.mapDatum == "bd09")
    }

    @Test func badValuesAreReportedWithTheirPaths() {
        let (_, problems) = load(#"{"tail": 0, "datum": "utm", "colour": "red"}"#)
        #expect(problems.contains { $0.hasPrefix("api.map.tail: ") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("api.map.datum: ") && $0.contains("wgs84") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("api.map.colour: unknown option") }, "\(problems)")
        #expect(problems.count == 3, "\(problems)")
        #expect(load(#"{"tail": 201}"#).1.first?.hasPrefix("api.map.tail: ") == true)
    }
}
