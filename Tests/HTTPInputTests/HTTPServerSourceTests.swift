import DeviceCommands
import Dispatch
import Foundation
import GatewayCore
import GatewayTesting
import HTTPInput
import Synchronization
import Testing

/// What curl got: the status (0 when it could not connect) and the body.
struct Reply: Sendable {
    var status: Int
    var body: String
}

/// A request sent with curl, as an app would; runs off the test's task so the test can hold
/// the acknowledgement meanwhile. curl waits on a Dispatch thread: a blocked cooperative thread
/// (two on this machine) would stall the source's own task.
func curl(_ url: String, method: String = "POST", headers: [String] = [], body: String? = nil, extra: [String] = []) -> Task<Reply, Never> {
    Task {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: runCurl(url, method: method, headers: headers, body: body, extra: extra)) }
        }
    }
}

private func runCurl(_ url: String, method: String, headers: [String], body: String?, extra: [String]) -> Reply {
    var args = ["curl", "-s", "-S", "--max-time", "30", "-X", method, "-o", "-", "-w", "\n%{http_code}"]
    for h in headers { args += ["-H", h] }
    if let body { args += ["--data-binary", body] }
    args += extra + [url]
    guard let r = try? Program.run("/usr/bin/env", args) else { return Reply(status: 0, body: "") }
    let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let status = Int(lines.last ?? "") ?? 0
    return Reply(status: status, body: status == 0 ? r.stderr : lines.dropLast().joined(separator: "\n"))
}

/// Runs an http_server source on a free port until `body` returns.
func withServer(_ json: String, output: SourceOutput, commands: (any CommandCenter)? = nil,
                _ body: (String, ComponentContext) async throws -> Void) async throws {
    let port = LoopbackTCPServer.freePort()
    let c = try PluginOptions.valid(HTTPServerSourcePlugin.self, json.replacingOccurrences(of: "PORT", with: "\(port)"))
    let plain = SourceConformance.makeContext(id: "phones")
    let context = ComponentContext(id: plain.id, kind: .source, logger: plain.logger, stats: plain.stats, clock: plain.clock, commands: commands)
    let source = try HTTPServerSourcePlugin.makeSource(c, context: context)
    let task = Task { try await source.run(output: output) }
    defer { task.cancel() }
    #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
    try await body("http://127.0.0.1:\(port)", context)
    task.cancel()
    _ = await task.result
}

@Suite(.timeLimit(.minutes(1))) struct HTTPServerSourceTests {
    static let ownTracksLocation = #"{"_type":"location","acc":12,"alt":45,"batt":87,"cog":270,"lat":52.3731,"lon":4.8922,"tid":"an","tst":1733061600,"vel":36,"topic":"owntracks/ana/phone"}"#

    @Test func answersTheOwnTracksAppOnlyOnceItsLocationIsHandled() async throws {
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "owntracks", "devices": { "ana/phone": "ana" } }"#,
                             output: acks.output) { url, context in
            // The app's HTTP mode: a POST with its UserID and DeviceID in X-Limit-U / X-Limit-D.
            let reply = curl(url + "/pub", headers: ["Content-Type: application/json", "X-Limit-U: ana", "X-Limit-D: phone", "User-Agent: Owntracks-Android/2.4"],
                             body: Self.ownTracksLocation)
            #expect(await Poll.until { acks.positions.count == 1 })
            try await Task.sleep(for: .milliseconds(200))
            #expect(context.stats.value("acks.sent") == 0)
            acks.acknowledge()
            let r = await reply.value
            #expect(r.status == 200)
            #expect(r.body == "[]")
            let p = try #require(acks.positions.first)
            #expect(p.device == "ana")
            #expect(p.time == Timestamp(milliseconds: 1_733_061_600_000))
            #expect(p.latitude == 52.3731 && p.longitude == 4.8922)
            #expect(abs((p.speed ?? 0) - 10) < 1e-9)
            #expect(p.id == "phones-ana-1733061600000")
            #expect(p.attributes["batt"] == "87")
        }
    }

    @Test func anOwnTracksPhoneGetsItsCommandsInTheAnswerToItsNextLocation() async throws {
        let board = try CommandBoard(store: MemoryCommandStore(), clock: .system, logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "owntracks", "devices": { "ana/phone": "ana" } }"#,
                             output: acks.output, commands: board) { url, context in
            #expect(await Poll.until { (try? board.submit(CommandRequest(device: "ana", type: .positionNow, submittedBy: "ops"))) != nil })
            let engine = try? board.submit(CommandRequest(device: "ana", type: .engineStop, submittedBy: "ops"))
            #expect(engine == nil, "a phone has no engine to stop")
            let headers = ["Content-Type: application/json", "X-Limit-U: ana", "X-Limit-D: phone"]
            let first = curl(url + "/pub", headers: headers, body: Self.ownTracksLocation)
            #expect(await Poll.until { acks.positions.filter { $0.event == nil }.count == 1 })
            acks.acknowledge()
            #expect(await first.value.body == #"[{"_type":"cmd","action":"reportLocation"}]"#)
            let id = try #require(board.commands(device: "ana").first?.id)
            #expect(await Poll.until { board.command(id)?.status == .delivered })
            // The next command goes with the next answer.
            _ = try board.submit(CommandRequest(device: "ana", type: .setInterval, parameters: ["interval": "30s"], submittedBy: "ops"))
            let second = curl(url + "/pub", headers: headers, body: Self.ownTracksLocation.replacingOccurrences(of: "1733061600", with: "1733061660"))
            #expect(await Poll.until { acks.positions.filter { $0.event == nil }.count == 2 })
            acks.acknowledge()
            let secondReply = await second.value
            #expect(secondReply.body == #"[{"_type":"cmd","action":"setConfiguration","configuration":{"_type":"configuration","locatorInterval":30}}]"#, "\(secondReply)")
            #expect(await Poll.until { context.stats.value("commands.delivered") == 2 })
        }
    }

    @Test func aCommandThatExpiredOrWasCancelledWhileWaitingForThePhoneNeverReachesIt() async throws {
        let clock = ManualClock()
        let board = try CommandBoard(store: MemoryCommandStore(), clock: clock, logger: Logger(label: "c", handler: SilentLogHandler()))
        defer { board.close() }
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "owntracks", "devices": { "ana/phone": "ana" } }"#,
                             output: acks.output, commands: board) { url, _ in
            let headers = ["Content-Type: application/json", "X-Limit-U: ana", "X-Limit-D: phone"]
            func post(_ n: Int) async -> String {
                let reply = curl(url + "/pub", headers: headers, body: Self.ownTracksLocation.replacingOccurrences(of: "1733061600", with: String(1_733_061_600 + 60 * n)))
                #expect(await Poll.until { acks.positions.filter { $0.event == nil }.count == n + 1 })
                acks.acknowledge()
                return await reply.value.body
            }
            #expect(await post(0) == "[]")
            // Waits for the phone's next request; meanwhile its time to live passes.
            let x = try board.submit(CommandRequest(device: "ana", type: .positionNow, ttl: .seconds(10), submittedBy: "ops"))
            #expect(await Poll.until { board.command(x.id)?.status == .sent })
            clock.advance(by: .seconds(11))
            board.sweep()
            #expect(board.command(x.id)?.status == .expired)
            #expect(await post(1) == "[]")
            // Cancelled while waiting: taken back too, and the next one goes.
            let y = try board.submit(CommandRequest(device: "ana", type: .setInterval, parameters: ["interval": "30s"], submittedBy: "ops"))
            #expect(await Poll.until { board.command(y.id)?.status == .sent })
            #expect(try board.cancel(y.id, by: "ops").status == .cancelled)
            _ = try board.submit(CommandRequest(device: "ana", type: .positionNow, submittedBy: "ops"))
            #expect(await post(2) == #"[{"_type":"cmd","action":"reportLocation"}]"#)
            #expect(board.command(y.id)?.status == .cancelled)
        }
    }

    @Test func answersOwnTracksMessagesWithoutALocationAtOnce() async throws {
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "owntracks", "unknown_devices": "accept" }"#,
                             output: acks.output) { url, context in
            let r = await curl(url, headers: ["Content-Type: application/json", "X-Limit-U: ana"],
                               body: #"{"_type":"transition","event":"enter","desc":"home","tst":1733061600}"#).value
            #expect(r.status == 200)
            #expect(acks.positions.isEmpty)
            #expect(context.stats.value("messages.transition") == 1)
            let bad = await curl(url, headers: ["Content-Type: application/json", "X-Limit-U: ana"], body: #"{"_type":"location","lat":91,"lon":0,"tst":1}"#).value
            #expect(bad.status == 400)
            #expect(bad.body.contains("out of range"))
        }
    }

    @Test func readsTraccarClientQueriesAndJSONBodies() async throws {
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "osmand", "devices": { "902064": "van", "48241179": "phone" } }"#,
                             output: acks.output) { url, _ in
            // Traccar's OsmAndProtocolDecoderTest: the query form, with the time in milliseconds.
            let query = curl(url + "/?id=902064&lat=42.06288&lon=-88.23412&timestamp=1442068686579&hdop=6.0&altitude=224.0&speed=10.0&batt=77", method: "GET")
            let json = curl(url, headers: ["Content-Type: application/json"], body: #"{"location":{"timestamp":"2025-06-15T13:45:12.862Z","coords":{"latitude":37.4219983,"longitude":-122.084,"accuracy":5,"speed":0,"heading":-1,"altitude":5},"is_moving":false,"odometer":0,"event":"motionchange","battery":{"level":1,"is_charging":false},"activity":{"type":"still"},"extras":{}},"device_id":"48241179"}"#)
            #expect(await Poll.until { acks.positions.count == 2 })
            acks.acknowledge()
            #expect(await query.value.status == 200)
            let j = await json.value
            #expect(j.status == 200, "\(j) \(acks.positions.map(\.id))")
            let van = try #require(acks.positions.first { $0.device == "van" })
            #expect(van.time == Timestamp(milliseconds: 1_442_068_686_579))
            #expect(abs((van.speed ?? 0) - 10 * 1852 / 3600) < 1e-9)
            #expect(van.altitude == 224 && van.hdop == 6)
            #expect(van.attributes["batt"] == "77")
            let phone = try #require(acks.positions.first { $0.device == "phone" })
            #expect(phone.time == Timestamp(iso8601: "2025-06-15T13:45:12.862Z"))
            #expect(phone.attributes["batt"] == "100")
            #expect(phone.course == nil)
        }
    }

    @Test func keepsTheIdsOfLocgatesOwnJSON() async throws {
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "json", "unknown_devices": "accept" }"#,
                             output: acks.output) { url, _ in
            let body = #"[{"class":"TPV","id":"log-1584538099600","source":"log","device":"van-7","time":"2020-03-18T13:28:19.600Z","mode":3,"lat":41.57496591,"lon":-93.750571901,"datum":"wgs84"},{"device":"van-8","time":"2020-03-18T13:28:20Z","lat":41.5,"lon":-93.7}]"#
            let reply = curl(url, headers: ["Content-Type: application/json"], body: body)
            #expect(await Poll.until { acks.positions.count == 2 })
            acks.acknowledge()
            let r = await reply.value
            #expect(r.status == 200, "\(r)")
            #expect(r.body == #"{"accepted":2}"#)
            #expect(Set(acks.positions.map(\.id)) == ["log-1584538099600", "phones-van-8-1584538100000"])
        }
    }

    @Test func readsTheBodyAnotherLocgateUploadsThroughATemplate() async throws {
        let acks = HeldAcknowledgements()
        let config = #"""
        { "listen": "127.0.0.1:PORT", "format": "template", "datum": "bd09", "devices": { "42": "park-cart" },
          "template": { "vipId": "$device", "list": "$positions" },
          "fields": { "date": { "from": "time", "time_format": "yyyy-MM-dd HH:mm:ss", "zone": "Asia/Shanghai" }, "latitude": "lat", "longitude": "lon", "steps": "attributes.steps" },
          "response": { "body": { "resultInteger": 1 } } }
        """#
        try await withServer(config, output: acks.output) { url, _ in
            let body = #"{"vipId":"42","list":[{"date":"2024-05-01 18:00:00","steps":12,"latitude":39.915,"longitude":116.404},{"date":"2024-05-01 18:00:20","latitude":39.916,"longitude":116.405}]}"#
            let reply = curl(url, headers: ["Content-Type: application/json"], body: body)
            #expect(await Poll.until { acks.positions.count == 2 })
            acks.acknowledge()
            let r = await reply.value
            #expect(r.status == 200)
            #expect(r.body == #"{"resultInteger":1}"#)
            let first = try #require(acks.positions.first)
            #expect(first.device == "park-cart")
            #expect(first.time == Timestamp(year: 2024, month: 5, day: 1, hour: 10))
            #expect(first.datum == .bd09)
            #expect(first.attributes["steps"] == "12")
            #expect(first.latitude == 39.915)
        }
    }

    @Test func refusesWithTheStatusAndReasonAClientNeeds() async throws {
        let acks = HeldAcknowledgements()
        let config = #"{ "listen": "127.0.0.1:PORT", "format": "json", "path": "/track", "users": { "gw1": "s3cret" }, "tokens": { "t0k3n": "van-1" }, "unknown_devices": "accept", "max_body_bytes": 1000 }"#
        try await withServer(config, output: acks.output) { url, context in
            let position = #"{"device":"van-1","time":"2024-05-01T10:00:00Z","lat":1,"lon":2}"#
            #expect(await curl(url + "/track", headers: ["Content-Type: application/json"], body: position).value.status == 401)
            #expect(await curl(url + "/track", headers: ["Content-Type: application/json"], body: position, extra: ["-u", "gw1:wrong"]).value.status == 401)
            #expect(await curl(url + "/elsewhere", headers: ["Content-Type: application/json"], body: position, extra: ["-u", "gw1:s3cret"]).value.status == 404)
            #expect(await curl(url + "/track", method: "GET", extra: ["-u", "gw1:s3cret"]).value.status == 405)
            #expect(await curl(url + "/track", headers: ["Content-Type: image/png"], body: position, extra: ["-u", "gw1:s3cret"]).value.status == 415)
            let bad = await curl(url + "/track", headers: ["Content-Type: application/json"], body: "{nope", extra: ["-u", "gw1:s3cret"]).value
            #expect(bad.status == 400)
            #expect(bad.body.contains("not JSON"))
            #expect(await curl(url + "/track", headers: ["Content-Type: application/json"], body: String(repeating: " ", count: 2000) + position, extra: ["-u", "gw1:s3cret"]).value.status == 413)
            // A device token sends for its device only.
            let other = #"{"device":"van-2","time":"2024-05-01T10:00:00Z","lat":1,"lon":2}"#
            #expect(await curl(url + "/track", headers: ["Content-Type: application/json", "Authorization: Bearer t0k3n"], body: other).value.status == 403)
            let good = curl(url + "/track?token=t0k3n", headers: ["Content-Type: application/json"], body: position)
            #expect(await Poll.until { acks.positions.count == 1 })
            acks.acknowledge()
            #expect(await good.value.status == 200)
            #expect(context.stats.value("requests.unauthorized") == 2)
            #expect(context.stats.value("requests.bad_body") == 1)
            #expect(context.stats.value("requests.too_large") == 1)
        }
    }

    @Test func refusesAnUnknownDevice() async throws {
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "osmand", "devices": { "1": "one" } }"#, output: acks.output) { url, context in
            let r = await curl(url + "/?id=2&lat=1&lon=2", method: "GET").value
            #expect(r.status == 403)
            #expect(r.body.contains("unknown device 2"))
            #expect(context.stats.value("devices.unknown") == 1)
            #expect(acks.positions.isEmpty)
        }
    }

    @Test func answersAWaitingRequest503WhenStoppedSoTheAppSendsItAgain() async throws {
        let acks = HeldAcknowledgements()
        let port = LoopbackTCPServer.freePort()
        let c = try PluginOptions.valid(HTTPServerSourcePlugin.self, #"{ "listen": "127.0.0.1:\#(port)", "format": "osmand", "unknown_devices": "accept" }"#)
        let source = try HTTPServerSourcePlugin.makeSource(c, context: SourceConformance.makeContext())
        let task = Task { try await source.run(output: acks.output) }
        #expect(await Poll.until { (try? LoopbackTCPClient(port: port)) != nil })
        let reply = curl("http://127.0.0.1:\(port)/?id=9&lat=1&lon=2&timestamp=1700000000", method: "GET")
        #expect(await Poll.until { acks.positions.count == 1 })
        task.cancel()
        _ = await task.result
        #expect(await reply.value.status == 503)
    }

    @Test func refusesAnOpenListenWithoutCredentials() throws {
        let (_, problems) = try PluginOptions.read(HTTPServerSourcePlugin.self, #"{ "type": "http_server", "listen": "0.0.0.0:5055", "format": "osmand", "unknown_devices": "accept" }"#)
        #expect(problems.map(\.path) == ["sources.under_test.listen"])
        let (_, wrong) = try PluginOptions.read(HTTPServerSourcePlugin.self, #"{ "type": "http_server", "format": "json", "unknown_devices": "accept", "fields": {} }"#)
        #expect(wrong.map(\.path) == ["sources.under_test.fields"])
    }

    @Test func servesPhonesOverHTTPS() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let certificates = try TestCertificates(in: dir)
        let acks = HeldAcknowledgements()
        let config = #"{ "listen": "127.0.0.1:PORT", "format": "osmand", "unknown_devices": "accept", "tls": { "cert_file": "CERT", "key_file": "KEY" } }"#
            .replacingOccurrences(of: "CERT", with: certificates.serverCert).replacingOccurrences(of: "KEY", with: certificates.serverKey)
        try await withServer(config, output: acks.output) { url, _ in
            let https = url.replacingOccurrences(of: "http://", with: "https://")
            let reply = curl(https + "/?id=7&lat=1&lon=2&timestamp=1700000000", method: "GET", extra: ["--cacert", certificates.ca])
            #expect(await Poll.until { acks.positions.count == 1 })
            acks.acknowledge()
            let r = await reply.value
            #expect(r.status == 200, "\(r)")
        }
    }

    @Test func refusesAHundredMegabyteBodyWithoutReadingIt() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let big = dir + "/big.json"
        #expect(FileManager.default.createFile(atPath: big, contents: Data(count: 100 << 20)))
        let acks = HeldAcknowledgements()
        try await withServer(#"{ "listen": "127.0.0.1:PORT", "format": "json", "unknown_devices": "accept" }"#, output: acks.output) { url, context in
            let r = await curl(url, headers: ["Content-Type: application/json"], extra: ["--data-binary", "@" + big]).value
            #expect(r.status == 413)
            #expect(context.stats.value("requests.too_large") == 1)
            #expect(acks.positions.isEmpty)
        }
    }
}
