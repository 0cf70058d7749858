import Foundation
import GatewayCore
import GatewayTesting
import NATSClient
@testable import NATSOutput
import DeliveryEngine
import Testing

@Suite struct ConfigurationTests {
    @Test func defaultsAreTheDocumentedOnes() throws {
        let c = try PluginOptions.valid(NATSSinkPlugin.self, #"{ "servers": ["nats://127.0.0.1:4222"], "queue": { "path": "q.sqlite" } }"#, baseDirectory: "/var/lib/locgate")
        #expect(c.connection.servers == ["nats://127.0.0.1:4222"])
        #expect(c.connection.credentials == .none)
        #expect(c.connection.tls == nil)
        #expect(c.connection.connectTimeout == .seconds(5))
        #expect(c.connection.reconnectInitial == .milliseconds(200))
        #expect(c.connection.reconnectMax == .seconds(5))
        #expect(c.subject.text == "locgate.positions.{device}")
        #expect(c.jetstream)
        #expect(c.expectStream == nil)
        #expect(c.stream == nil)
        #expect(c.maxPending == 1000)
        #expect(c.ackTimeout == .seconds(5))
        #expect(c.format == .json)
        #expect(c.queue == .disk(path: "/var/lib/locgate/q.sqlite", maxRecords: 1_000_000, maxAge: nil, synchronousFull: true))
        #expect(NATSSinkPlugin.isDurable(c))
        #expect(NATSSinkPlugin.claims(of: c) == ["file /var/lib/locgate/q.sqlite"])
    }

    @Test func aStreamToCreateIsAlsoTheExpectedStream() throws {
        let c = try PluginOptions.valid(NATSSinkPlugin.self, #"""
            { "servers": ["tls://a.example:4443", "nats://b.example"], "subject": "fleet.{source}.{device}",
              "stream": { "name": "FLEET", "replicas": 3, "duplicate_window": "10m", "storage": "memory" },
              "token": "${T}", "queue": null }
            """#, environment: ["T": "s3cret"])
        #expect(c.stream == NATSStreamConfig(name: "FLEET", subjects: ["fleet.*.*"], replicas: 3, duplicateWindow: .seconds(600), fileStorage: false))
        #expect(c.expectStream == "FLEET")
        #expect(c.connection.credentials == .token("s3cret"))
        // A tls:// URL asks for TLS with the default trust.
        #expect(c.connection.tls == NATSConnectionOptions.TLS())
        #expect(!NATSSinkPlugin.isDurable(c))
    }

    @Test func tlsFilesAreResolvedAndChecked() throws {
        let dir = NSTemporaryDirectory() + "locgate-nats-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for f in ["ca.pem", "cert.pem", "key.pem"] { #expect(FileManager.default.createFile(atPath: "\(dir)/\(f)", contents: Data("x".utf8))) }
        let c = try PluginOptions.valid(NATSSinkPlugin.self, #"""
            { "servers": ["nats://127.0.0.1:4222"], "tls": { "ca_file": "ca.pem", "cert_file": "cert.pem", "key_file": "key.pem", "verify": false },
              "user": "gw", "password": "pw", "queue": null }
            """#, baseDirectory: dir)
        #expect(c.connection.tls == NATSConnectionOptions.TLS(caFile: "\(dir)/ca.pem", certFile: "\(dir)/cert.pem", keyFile: "\(dir)/key.pem", verify: false))
        #expect(c.connection.credentials == .userPassword(user: "gw", password: "pw"))
    }

    @Test(arguments: [
        (#"{ "servers": ["nats://127.0.0.1:4222"], "subject": "locgate.my positions.{device}", "queue": null }"#, ["sinks.up.subject"]),
        (#"{ "queue": null }"#, ["sinks.up.servers"]),
        (#"{ "servers": [], "queue": null }"#, ["sinks.up.servers"]),
        (#"{ "servers": ["http://127.0.0.1:4222"], "queue": null }"#, ["sinks.up.servers[0]"]),
        (#"{ "servers": ["nats://127.0.0.1:4222", "nats://127.0.0.1:99999"], "queue": null }"#, ["sinks.up.servers[1]"]),
        (#"{ "servers": ["nats://:4222"], "queue": null }"#, ["sinks.up.servers[0]"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "tls": { "ca_file": "/nonexistent/ca.pem" }, "queue": null }"#, ["sinks.up.tls.ca_file"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "credentials": "/nonexistent/gw.creds", "queue": null }"#, ["sinks.up.credentials"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "subject": "locgate.{vehicle}", "queue": null }"#, ["sinks.up.subject"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "subject": "locgate.*", "queue": null }"#, ["sinks.up.subject"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "subject": "locgate..{device}", "queue": null }"#, ["sinks.up.subject"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "expect_stream": "my.stream", "queue": null }"#, ["sinks.up.expect_stream"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "jetstream": false, "expect_stream": "S", "queue": null }"#, ["sinks.up.expect_stream"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "stream": { "subjects": ["a.>"] }, "queue": null }"#, ["sinks.up.stream.name"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "stream": { "name": "S", "subjects": ["a.>.b"] }, "queue": null }"#, ["sinks.up.stream.subjects[0]"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "stream": { "name": "S", "replicas": 7 }, "queue": null }"#, ["sinks.up.stream.replicas"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "token": "t", "user": "u", "queue": null }"#, ["sinks.up.user"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "password": "p", "queue": null }"#, ["sinks.up.password"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "max_pending": 0, "queue": null }"#, ["sinks.up.max_pending"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"], "format": "xml", "queue": null }"#, ["sinks.up.format"]),
        (#"{ "servers": ["nats://127.0.0.1:4222"] }"#, ["sinks.up.queue"]),
    ])
    func reportsEachProblemWithItsPath(json: String, paths: [String]) throws {
        let (_, problems) = try PluginOptions.read(NATSSinkPlugin.self, json, path: "sinks.up")
        #expect(problems.map(\.path) == paths, "\(problems)")
    }

    @Test func aSubjectWithSpacesSaysSo() throws {
        let (_, problems) = try PluginOptions.read(NATSSinkPlugin.self, #"{ "servers": ["nats://127.0.0.1:4222"], "subject": "locgate positions", "queue": null }"#, path: "sinks.up")
        #expect(problems.map(\.description) == [#"sinks.up.subject: a subject cannot contain spaces or control characters: "locgate positions""#])
    }
}

@Suite struct SubjectTests {
    @Test func placeholdersAreCleanedIntoOneToken() throws {
        let t = try SubjectTemplate("fleet.{source}.{device}.{event}")
        let p = Position(source: "rx", device: "van 7.north>*", id: "x")
        #expect(t.render(p) == "fleet.rx.van_7_north__.position")
        var e = p
        e.event = FenceEvent(kind: .enter, fenceId: "park")
        e.device = nil
        #expect(t.render(e) == "fleet.rx.rx.enter")
        #expect(t.filter == "fleet.*.*.*")
        #expect(try SubjectTemplate("a.dev-{device}").render(Position(source: "s", device: "", id: "")) == "a.dev-_")
    }

    @Test(arguments: [
        ("locgate.positions.*", "locgate.>", true),
        ("locgate.positions.*", "locgate.positions.*", true),
        ("locgate.positions.*", "locgate.*.*", true),
        ("locgate.positions.*", "locgate.positions.van1", false),
        ("locgate.positions.*", "other.>", false),
        ("locgate.positions.*", "locgate.positions", false),
        ("locgate.positions", "locgate.>", true),
        ("locgate", "locgate.>", false),
        ("a.b", ">", true),
        ("a.>", "a.*", false),
    ])
    func streamSubjectsCaptureTheSubject(filter: String, by: String, expected: Bool) {
        #expect(NATSSubject.isSubset(filter, of: by) == expected)
    }
}
