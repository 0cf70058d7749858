import Foundation
import GatewayCore
import GatewayTesting
import Testing

/// `POST /devices/{device}/commands`, `GET /devices/{device}/commands`, `GET` and `DELETE
/// /commands/{id}` over a pipeline with a `jt808` source, through curl: what is taken, what is
/// refused and why, and that a refusal queues nothing.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CommandEndpointTests {
    static func pipeline(_ dir: String) -> String {
        """
        { "settings": { "stats_interval": false, "commands": { "path": "\(dir)/commands.sqlite" } },
          "api": { "listen": "127.0.0.1:$API_PORT", "token": "admin-secret",
                   "tokens": { "ops": { "token": "ops-secret", "commands": ["set_interval", "position_now"] },
                               "viewer": { "token": "viewer-secret" } } },
          "sources": { "jt": { "type": "jt808", "listen": "127.0.0.1:\(LoopbackTCPServer.freePort())", "devices": { "13912345678": "bus-12" } },
                       "jtudp": { "type": "jt808", "udp": true, "listen": "127.0.0.1:\(LoopbackTCPServer.freePort(udp: true))", "devices": { "13900000001": "van-1" } } },
          "sinks": { "out": { "type": "file", "inputs": ["jt", "jtudp"], "path": "\(dir)/out.jsonl" } } }
        """
    }

    static func post(_ h: APIHarness, _ path: String, _ body: String, token: String) throws -> HTTPResult {
        try h.get(path, ["-X", "POST", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json", "--data-binary", body])
    }

    @Test func aCommandIsTakenReadAndCancelledWithTheRightTokens() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await APIHarness.run(Self.pipeline(dir)) { h in
            #expect(await Poll.until { h.status("/health", ["-H", "Authorization: Bearer admin-secret"]) == 200 })
            let created = try Self.post(h, "/devices/bus-12/commands", #"{"type": "set_interval", "interval": "20s", "id": "int-1"}"#, token: "ops-secret")
            #expect(created.status == 201, "\(created.body)")
            #expect(created.headers["location"] == "/commands/int-1")
            let command = try #require(try JSONValue.parse(string: created.body).objectValue)
            #expect(command["status"]?.stringValue == "queued")
            #expect(command["submitted_by"]?.stringValue == "ops")
            #expect(command["parameters"]?["interval"]?.stringValue == "20s")
            let one = try h.get("/commands/int-1", ["-H", "Authorization: Bearer viewer-secret"])
            #expect(one.status == 200 && one.body.contains("\"id\":\"int-1\""))
            let list = try h.get("/devices/bus-12/commands", ["-H", "Authorization: Bearer viewer-secret"])
            #expect(list.status == 200 && list.body.contains("int-1"))
            // The viewer may read but not cancel a set_interval; the ops token may.
            #expect(try h.get("/commands/int-1", ["-X", "DELETE", "-H", "Authorization: Bearer viewer-secret"]).status == 403)
            let cancelled = try h.get("/commands/int-1", ["-X", "DELETE", "-H", "Authorization: Bearer ops-secret"])
            #expect(cancelled.status == 200 && cancelled.body.contains("\"status\":\"cancelled\""))
            #expect(try h.get("/commands/int-1", ["-X", "DELETE", "-H", "Authorization: Bearer ops-secret"]).status == 409)
        }
    }

    @Test func badRequestsAreClearRefusalsAndQueueNothing() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await APIHarness.run(Self.pipeline(dir)) { h in
            #expect(await Poll.until { h.status("/health", ["-H", "Authorization: Bearer admin-secret"]) == 200 })
            let cases: [(String, String, String, Int, String)] = [
                ("/devices/ghost/commands", #"{"type": "reboot"}"#, "admin-secret", 404, "no source knows it"),
                ("/devices/bus-12/commands", #"{"type": "self_destruct"}"#, "admin-secret", 400, "unknown command type"),
                ("/devices/bus-12/commands", #"{"type": "set_interval"}"#, "admin-secret", 400, "interval: required"),
                ("/devices/bus-12/commands", #"{"type": "set_interval", "interval": "20s", "ttl": "-5s"}"#, "admin-secret", 400, "ttl"),
                ("/devices/bus-12/commands", "not json", "admin-secret", 400, "not JSON"),
                ("/devices/bus-12/commands", #"{"type": "engine_stop"}"#, "ops-secret", 403, "may not send it"),
                ("/devices/bus-12/commands", #"{"type": "engine_stop"}"#, "wrong-secret", 401, "bearer token"),
                ("/devices/van-1/commands", #"{"type": "reboot"}"#, "admin-secret", 422, "cannot carry it"),
            ]
            for (path, body, token, status, text) in cases {
                let r = try Self.post(h, path, body, token: token)
                #expect(r.status == status, "\(path) \(body): \(r.status) \(r.body)")
                #expect(r.body.contains(text), "\(path) \(body): \(r.body)")
            }
            // A body of 1 MB is refused before it is read.
            let big = #"{"type": "text", "text": ""# + String(repeating: "x", count: 1_048_576) + #""}"#
            try Data(big.utf8).write(to: URL(fileURLWithPath: "\(dir)/big.json"))
            let r = try h.get("/devices/bus-12/commands", ["-X", "POST", "-H", "Authorization: Bearer admin-secret", "--data-binary", "@\(dir)/big.json"])
            #expect(r.status == 413)
            let list = try h.get("/devices/bus-12/commands", ["-H", "Authorization: Bearer admin-secret"])
            #expect(list.body == "{\"commands\":[]}\n", "nothing was queued: \(list.body)")
            // A device nobody knows has no list, and a huge time to live is a refusal, not a crash.
            #expect(try h.get("/devices/ghost/commands", ["-H", "Authorization: Bearer admin-secret"]).status == 404)
            for ttl in [#""1e300""#, "1e300", #""nan""#, #""inf""#] {
                let r = try Self.post(h, "/devices/bus-12/commands", #"{"type": "reboot", "ttl": \#(ttl)}"#, token: "admin-secret")
                #expect(r.status == 400 && r.body.contains("ttl"), "ttl \(ttl): \(r.status) \(r.body)")
            }
        }
    }
}
