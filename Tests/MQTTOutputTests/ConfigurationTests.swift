import PluginCatalog
import Foundation
import GatewayCore
import PositionEncoding
import GatewayTesting
import MQTTClient
@testable import MQTTOutput
import Testing

@Suite struct ConfigurationTests {
    @Test func defaultsAreTheDocumentedOnes() throws {
        let c = try configuration(#"{ "url": "mqtt://broker.local", "queue": null }"#)
        #expect(c.broker.host == "broker.local")
        #expect(c.broker.port == 1883)
        #expect(!c.broker.useTLS)
        #expect(c.broker.clientID == nil)
        #expect(!c.broker.cleanSession)
        #expect(c.broker.protocolVersion == "5")
        #expect(c.qos == 1)
        #expect(c.retain == .never)
        #expect(c.format.isJSON)
        #expect(c.status == nil)
        #expect(c.broker.keepalive == .seconds(60))
        #expect(c.maxInflight == 100)
        #expect(c.broker.reconnectMax == .seconds(10))
        #expect(c.broker.tls.verify)
        #expect(!MQTTSinkPlugin.isDurable(c))
        let p = positions(0..<1)[0]
        #expect(c.topic.render(p) == "locgate/dev0")
    }

    @Test func tlsURLsDefaultToPort8883AndReadEveryOption() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for f in ["ca.pem", "c.pem", "k.pem"] { #expect(FileManager.default.createFile(atPath: "\(dir)/\(f)", contents: Data("x".utf8))) }
        let c = try configuration("""
            { "url": "mqtts://[::1]/", "client_id": "gw-7", "clean_session": true, "protocol": "3.1.1", "qos": 2,
              "topic": "fleet/{source}/{device}/{event}", "retain": "last", "body": { "format": "owntracks" },
              "status": { "topic": "fleet/gw-7/status", "online": "up", "offline": "down" },
              "username": "u", "password": "p",
              "tls": { "ca_file": "\(dir)/ca.pem", "cert_file": "\(dir)/c.pem", "key_file": "\(dir)/k.pem", "verify": false },
              "keepalive": "30s", "max_inflight": 500, "reconnect_max": "2s", "queue": { "path": "\(dir)/q.sqlite" } }
            """)
        #expect(c.broker.useTLS && c.broker.host == "::1" && c.broker.port == 8883)
        #expect(c.broker.clientID == "gw-7" && c.broker.cleanSession && c.broker.protocolVersion == "3.1.1" && c.qos == 2)
        #expect(c.retain == .last && c.format.isOwnTracks)
        #expect(c.status == .init(topic: "fleet/gw-7/status", online: "up", offline: "down"))
        #expect(c.broker.username == "u" && c.broker.password == "p")
        #expect(c.broker.tls == ClientTLSOptions(caFile: "\(dir)/ca.pem", certFile: "\(dir)/c.pem", keyFile: "\(dir)/k.pem", verify: false))
        #expect(c.broker.keepalive == .seconds(30) && c.maxInflight == 500 && c.broker.reconnectMax == .seconds(2))
        #expect(MQTTSinkPlugin.isDurable(c))
        #expect(MQTTSinkPlugin.claims(of: c) == ["file \(dir)/q.sqlite"])
    }

    @Test(arguments: [
        (#"{ "url": "http://broker:1883", "queue": null }"#, "sinks.up.url", "mqtt://"),
        (#"{ "url": "mqtt://broker:99999", "queue": null }"#, "sinks.up.url", "mqtt://"),
        (#"{ "url": "mqtt://broker", "qos": 3, "queue": null }"#, "sinks.up.qos", "between 0 and 2"),
        (#"{ "url": "mqtts://broker", "tls": { "ca_file": "/nonexistent/ca.pem" }, "queue": null }"#, "sinks.up.tls.ca_file", "No such file"),
        (#"{ "url": "mqtts://broker", "tls": { "cert_file": "/etc/hostname" }, "queue": null }"#, "sinks.up.tls.key_file", "required with cert_file"),
        (#"{ "url": "mqtt://broker", "tls": { "verify": false }, "queue": null }"#, "sinks.up.tls", "mqtts://"),
        (#"{ "url": "mqtt://broker", "topic": "fleet/+/{device}", "queue": null }"#, "sinks.up.topic", "wildcards"),
        (#"{ "url": "mqtt://broker", "topic": "fleet/{vehicle}", "queue": null }"#, "sinks.up.topic", "{vehicle}"),
        (#"{ "url": "mqtt://broker", "topic": "fleet/{device", "queue": null }"#, "sinks.up.topic", "unterminated {"),
        (#"{ "url": "mqtt://broker", "topic": "$SYS/x", "queue": null }"#, "sinks.up.topic", "reserved"),
        (#"{ "url": "mqtt://broker", "retain": "first", "queue": null }"#, "sinks.up.retain", "\"last\""),
        (#"{ "url": "mqtt://broker", "protocol": "3", "queue": null }"#, "sinks.up.protocol", "3.1.1"),
        (#"{ "url": "mqtt://broker", "body": { "format": "geojson" }, "queue": null }"#, "sinks.up.body.format", "template"),
        (#"{ "url": "mqtt://broker", "body": { "format": "template", "template": { "a": 1 } }, "queue": null }"#, "sinks.up.body.template", "$positions"),
        (#"{ "url": "mqtt://broker", "body": { "fields": { "la": "lat" } }, "queue": null }"#, "sinks.up.body.fields", "only used"),
        (#"{ "url": "mqtt://broker", "status": { "online": "up" }, "queue": null }"#, "sinks.up.status.topic", "missing"),
        (#"{ "url": "mqtt://broker", "status": { "topic": "gw/{device}" }, "queue": null }"#, "sinks.up.status.topic", "fixed topic"),
        (#"{ "url": "mqtt://broker", "password": "p", "queue": null }"#, "sinks.up.password", "username"),
        (#"{ "url": "mqtt://broker", "keepalive": "1s", "queue": null }"#, "sinks.up.keepalive", "at least"),
        (#"{ "url": "mqtt://broker", "max_inflight": 0, "queue": null }"#, "sinks.up.max_inflight", "between"),
        (#"{ "url": "mqtt://broker", "qos": 1 }"#, "sinks.up.queue", "missing"),
        (#"{ "url": "mqtt://broker", "queue": null, "retain_last": true }"#, "sinks.up.retain_last", "unknown"),
    ])
    func reportsEachProblemWithItsPath(json: String, path: String, text: String) throws {
        let (_, problems) = try PluginOptions.read(MQTTSinkPlugin.self, json, path: "sinks.up")
        #expect(problems.map(\.path) == [path], "\(problems)")
        #expect(problems.first?.description.contains(text) == true, "\(problems)")
    }

    @Test func validateReportsABadSinkWithItsPath() throws {
        let pipeline = #"{ "sources": { "rx": { "type": "file", "path": "x.nmea" } }, "sinks": { "up": { "type": "mqtt", "inputs": ["rx"], "url": "amqp://broker", "qos": 3, "queue": null } } }"#
        let registry = BuiltinPlugins.registry
        let error = #expect(throws: ConfigurationError.self) { try PipelineConfiguration.load(json: Array(pipeline.utf8), registry: registry) }
        #expect(error?.problems.map(\.path).sorted() == ["sinks.up.qos", "sinks.up.url"])
    }

    @Test func topicValuesAreCleanedToOneLevelEach() throws {
        let (topic, problems) = MQTTTopic.compile("fleet/{source}/{device}/{event}")
        #expect(problems.isEmpty)
        var p = positions(0..<1)[0]
        p.device = "/dev/tty+ACM#0\n"
        p.source = ""
        #expect(topic?.render(p) == "fleet/_/_dev_tty_ACM_0_/position")
        p.event = FenceEvent(kind: .exit, fenceId: "park")
        p.device = nil
        p.source = "gps"
        #expect(topic?.render(p) == "fleet/gps/gps/exit")
    }

    /// Characters libmosquitto refuses in a topic (C1 controls, noncharacters) and over-long ids
    /// must not reach it: a refused topic would block the queue behind it.
    @Test func topicValuesLibmosquittoWouldRefuseAreCleanedAndCapped() throws {
        let (topic, _) = MQTTTopic.compile("t/{device}")
        var p = positions(0..<1)[0]
        let odd = [0x85, 0xFDD0, 0xFFFE, 0x1FFFF].map { String(Character(Unicode.Scalar(UInt32($0))!)) }
        p.device = "a\(odd[0])b\(odd[1])c\(odd[2])d\(odd[3])é"
        #expect(topic?.render(p) == "t/a_b_c_d_é")
        p.device = String(repeating: "x", count: 100_000)
        #expect(topic?.render(p).utf8.count == 2 + 256)
    }

    @Test func jsonPayloadIsThePositionObject() throws {
        let p = positions(7..<8)[0]
        var out: [UInt8] = []
        MQTTPayloadFormat.json.append(p, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == PositionJSON.string(p))
    }

    @Test func ownTracksLocationHasEveryFieldAnOwnTracksClientReads() throws {
        var p = Position(time: Timestamp(milliseconds: 1_714_557_600_900), latitude: 52.5200066, longitude: 13.404954, altitude: 34.6,
                         speed: 10, course: 271.6, mode: .threeD, horizontalError: 4.5, source: "rx", device: "van-17", id: "rx-1714557600900")
        var out: [UInt8] = []
        MQTTPayloadFormat.owntracks.append(p, to: &out)
        let o = try #require(try JSONValue.parse(string: String(decoding: out, as: UTF8.self)).objectValue)
        #expect(o.map(\.key) == ["_type", "lat", "lon", "tst", "acc", "alt", "vel", "cog", "tid", "_id"])
        #expect(o["_type"] == .string("location"))
        #expect(o["lat"] == .number(52.5200066))
        #expect(o["lon"] == .number(13.404954))
        #expect(o["tst"] == .number(1_714_557_600))       // seconds, floored
        #expect(o["acc"] == .number(5))                   // metres, an integer
        #expect(o["alt"] == .number(35))
        #expect(o["vel"] == .number(36))                  // 10 m/s = 36 km/h
        #expect(o["cog"] == .number(272))
        #expect(o["tid"] == .string("17"))                // last two characters of the device id
        #expect(o["_id"] == .string("rx-1714557600900"))

        p.attributes["tid"] = "VB"
        p.speed = nil
        p.horizontalError = nil
        out = []
        MQTTPayloadFormat.owntracks.append(p, to: &out)
        let o2 = try #require(try JSONValue.parse(string: String(decoding: out, as: UTF8.self)).objectValue)
        #expect(o2["tid"] == .string("VB"))
        #expect(o2["vel"] == nil && o2["acc"] == nil)
    }

    @Test(arguments: [(FenceEvent.Kind.enter, "enter"), (.exit, "leave")])
    func ownTracksTransitionForGeofenceEvents(kind: FenceEvent.Kind, event: String) throws {
        let p = Position(time: Timestamp(milliseconds: 1_714_557_600_000), latitude: 31.2, longitude: 121.5, mode: .twoD,
                         horizontalError: 12, source: "rx", device: "gw", id: "rx-1",
                         event: FenceEvent(kind: kind, fenceId: "park-3", fenceName: "Century Park"))
        var out: [UInt8] = []
        MQTTPayloadFormat.owntracks.append(p, to: &out)
        let o = try #require(try JSONValue.parse(string: String(decoding: out, as: UTF8.self)).objectValue)
        #expect(o["_type"] == .string("transition"))
        #expect(o["event"] == .string(event))
        #expect(o["desc"] == .string("Century Park"))
        #expect(o["rid"] == .string("park-3"))
        #expect(o["tst"] == .number(1_714_557_600))
        #expect(o["wtst"] == .number(1_714_557_600))
        #expect(o["lat"] == .number(31.2) && o["lon"] == .number(121.5) && o["acc"] == .number(12))
        #expect(o["tid"] == .string("gw"))
        #expect(o["_id"] == .string("rx-1"))
    }

    @Test func ownTracksDwellIsALocation() throws {
        var p = positions(0..<1)[0]
        p.event = FenceEvent(kind: .dwell, fenceId: "park-3")
        var out: [UInt8] = []
        MQTTPayloadFormat.owntracks.append(p, to: &out)
        let o = try #require(try JSONValue.parse(string: String(decoding: out, as: UTF8.self)).objectValue)
        #expect(o["_type"] == .string("location"))
        #expect(o["event"] == nil)
    }

    @Test func defaultClientIDIsStableAndNamesTheSink() {
        let a = MQTTBrokerConfiguration.defaultClientID(componentID: "up")
        #expect(a == MQTTBrokerConfiguration.defaultClientID(componentID: "up"))
        #expect(a.hasPrefix("locgate-") && a.hasSuffix("-up"))
        #expect(a != MQTTBrokerConfiguration.defaultClientID(componentID: "other"))
    }
}

@Suite struct TemplateBodyTests {
    @Test func templateHoldsTheOnePositionAsAnObjectMappedByTheHTTPFieldRules() throws {
        let c = try configuration(#"""
            { "url": "mqtt://broker", "queue": null,
              "body": { "format": "template", "template": { "vehicle": "v7", "fix": "$positions" },
                        "fields": { "t": { "from": "time", "time_format": "epoch_s" }, "la": "lat", "lo": { "from": "lon", "decimals": 2 },
                                    "kmh": { "from": "speed", "scale": 3.6, "decimals": 0 } } } }
            """#)
        var out: [UInt8] = []
        c.format.append(positions(0..<1)[0], to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"{"vehicle":"v7","fix":{"t":1714557600,"la":31.2,"lo":121.5,"kmh":9}}"#)
    }

    @Test func templateWithoutFieldsHoldsTheWholePositionObject() throws {
        let c = try configuration(#"{ "url": "mqtt://broker", "queue": null, "body": { "format": "template", "template": ["$positions"] } }"#)
        let p = positions(0..<1)[0]
        var out: [UInt8] = []
        c.format.append(p, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "[" + PositionJSON.string(p) + "]")
    }
}
