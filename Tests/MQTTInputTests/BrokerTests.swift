import Foundation
import GatewayCore
import GatewayTesting
@testable import MQTTInput
import MQTTTesting
import Testing

/// The source in process against a real mosquitto on loopback, fed by `mosquitto_pub -q 1`.
@Suite(.serialized) struct BrokerTests {
    static func config(_ broker: MosquittoBroker, clientID: String, topics: String = #"["owntracks/+/+"]"#, extra: String = "") throws -> MQTTSourceConfiguration {
        try configuration("""
            { "url": "\(broker.url)", "username": "\(broker.user)", "password": "\(broker.password)", "client_id": "\(clientID)",
              "topics": \(topics), "reconnect_max": "1s" \(extra) }
            """)
    }

    @Test(.timeLimit(.minutes(2)))
    func ownTracksLocationsPublishedWhileLocgateIsDownArriveAfterItStartsConverted() async throws {
        let broker = try MosquittoBroker()
        let c = try Self.config(broker, clientID: "fleet-\(UUID().uuidString.prefix(8))", extra: #", "format": "owntracks""#)
        // The first run creates the persistent session (its subscription), then locgate goes down.
        let first = try SourceRun(c)
        #expect(await first.subscribed())
        await first.stop()
        let tst = 1_714_557_600
        try publish(broker, topic: "owntracks/alice/phone", (0..<5).map { i in
            ownTracks(tst: tst + i * 30, lat: 31.2 + Double(i) * 0.001, lon: 121.5, acc: 10 + i, vel: 36 * (i + 1), cog: 90 + i)
        })
        let second = try SourceRun(c)
        #expect(await Poll.until(timeout: .seconds(30)) { second.held.positions.count >= 5 })
        await second.stop()
        let got = second.held.positions
        #expect(got.count == 5)
        for (i, p) in got.enumerated() {
            #expect(p.time == Timestamp(milliseconds: Int64(tst + i * 30) * 1000))
            #expect(p.latitude == 31.2 + Double(i) * 0.001 && p.longitude == 121.5)
            #expect(p.horizontalError == Double(10 + i))
            // vel is km/h: 36 km/h is 10 m/s.
            #expect(abs((p.speed ?? -1) - 10 * Double(i + 1)) < 1e-9)
            #expect(p.course == Double(90 + i) && p.altitude == 41)
            #expect(p.attributes["batt"] == "87" && p.attributes["tid"] == "ph")
            #expect(p.device == "alice/phone" && p.source == "phones")
            #expect(p.id == "phones-alice/phone-\(Int64(tst + i * 30) * 1000)")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func jsonPositionsKeepTheirFieldsAndDevice() async throws {
        let broker = try MosquittoBroker()
        let c = try Self.config(broker, clientID: "json-\(UUID().uuidString.prefix(8))", topics: #"["locgate/#"]"#, extra: #", "format": "json""#)
        let run = try SourceRun(c)
        #expect(await run.subscribed())
        try publish(broker, topic: "locgate/gw1/van-7", [
            #"{"class":"TPV","time":"2024-05-01T10:00:00.000Z","lat":31.25,"lon":121.5,"altMSL":12.5,"speed":2.5,"track":87,"mode":3,"eph":4.5,"device":"van-1","id":"rx-1"}"#,
            #"{"time":"2024-05-01T10:00:01.000Z","lat":31.26,"lon":121.51}"#,
        ])
        #expect(await Poll.until(timeout: .seconds(20)) { run.held.positions.count >= 2 })
        await run.stop()
        let p = run.held.positions
        #expect(p.count == 2)
        #expect(p[0].id == "rx-1" && p[0].device == "van-1" && p[0].mode == .threeD && p[0].speed == 2.5 && p[0].course == 87 && p[0].horizontalError == 4.5)
        #expect(p[0].time == Timestamp(iso8601: "2024-05-01T10:00:00.000Z"))
        // No device of its own: the topic's last two levels; no id: source, device and time.
        #expect(p[1].device == "gw1/van-7" && p[1].id == "phones-gw1/van-7-\(Timestamp(iso8601: "2024-05-01T10:00:01.000Z")!.milliseconds)")
    }

    @Test(.timeLimit(.minutes(2)))
    func badInputIsCountedSkippedAndStillAcknowledged() async throws {
        let broker = try MosquittoBroker()
        let c = try Self.config(broker, clientID: "bad-\(UUID().uuidString.prefix(8))", topics: #"["owntracks/#"]"#)
        let run = try SourceRun(c)
        #expect(await run.subscribed())
        let big = broker.directory + "/big.json"
        // 10 MB: a JSON string that is valid all the way through, far over max_message_bytes.
        try Data(("{\"_type\":\"location\",\"x\":\"" + String(repeating: "a", count: 10 << 20) + "\"}").utf8).write(to: URL(fileURLWithPath: big))
        try publish(broker, topic: "owntracks/bob/phone", [
            "{not json",
            #"{"time":"2024-05-01T10:00:00Z","speed":3}"#,
            #"{"_type":"transition","event":"enter","tst":1714557600}"#,
            #"{"_type":"location","lat":91,"lon":0,"tst":1714557600}"#,
        ])
        try publishFile(broker, topic: "owntracks/bob/phone", path: big)
        try publish(broker, topic: "owntracks/bob/phone", [ownTracks(tst: 1_714_557_700, lat: 31, lon: 121)])
        #expect(await Poll.until(timeout: .seconds(30)) { run.held.positions.count >= 1 })
        await run.stop()
        #expect(run.held.positions.map(\.time) == [Timestamp(milliseconds: 1_714_557_700_000)])
        #expect(run.stats.value("mqtt.messages") == 6)
        #expect(run.stats.value("mqtt.skipped.malformed") == 1)
        #expect(run.stats.value("mqtt.skipped.no_position") == 1)
        #expect(run.stats.value("mqtt.skipped.other_type") == 1)
        #expect(run.stats.value("mqtt.skipped.invalid") == 1)
        #expect(run.stats.value("mqtt.skipped.too_large") == 1)
        // Skipped messages were acknowledged too: the next run of the session gets only what is new.
        let again = try SourceRun(c)
        #expect(await again.subscribed())
        try publish(broker, topic: "owntracks/bob/phone", [ownTracks(tst: 1_714_557_800, lat: 31, lon: 121)])
        #expect(await Poll.until(timeout: .seconds(20)) { again.held.positions.count >= 1 })
        await again.stop()
        #expect(again.stats.value("mqtt.messages") == 1)
    }

    @Test(.timeLimit(.minutes(2)))
    func aMessageTheSinksHaveNotTakenIsDeliveredAgainAfterAStop() async throws {
        let broker = try MosquittoBroker()
        let c = try Self.config(broker, clientID: "e2e-\(UUID().uuidString.prefix(8))", extra: #", "max_unacked": 1"#)
        // The sinks never take the position: its acknowledgement is held when the source stops.
        let first = try SourceRun(c, autoAcknowledge: false)
        #expect(await first.subscribed())
        try publish(broker, topic: "owntracks/carol/phone", [ownTracks(tst: 1_714_557_600, lat: 31, lon: 121)])
        #expect(await Poll.until(timeout: .seconds(20)) { first.held.positions.count == 1 })
        await first.stop()
        // The PUBACK never left: the broker delivers the message again to the resumed session.
        let second = try SourceRun(c)
        #expect(await Poll.until(timeout: .seconds(20)) { second.held.positions.count >= 1 })
        await second.stop()
        #expect(second.held.positions.map(\.id) == first.held.positions.map(\.id))
    }

    @Test(.timeLimit(.minutes(2)))
    func withMaxUnackedOneTheNextMessageWaitsForTheFirstToBeHandled() async throws {
        let broker = try MosquittoBroker()
        let c = try Self.config(broker, clientID: "win-\(UUID().uuidString.prefix(8))")
        let run = try SourceRun(c, autoAcknowledge: false)
        #expect(await run.subscribed())
        try publish(broker, topic: "owntracks/dave/phone", [ownTracks(tst: 1_714_557_600, lat: 31, lon: 121), ownTracks(tst: 1_714_557_601, lat: 31, lon: 121)])
        #expect(await Poll.until(timeout: .seconds(20)) { run.held.positions.count == 1 })
        // The second message is held back (the network thread waits, so libmosquitto does not even
        // read it) until the first is handled.
        #expect(run.stats.value("mqtt.unacked") == 1)
        #expect(await Poll.until(timeout: .seconds(2)) { run.stats.value("mqtt.messages") > 1 || run.held.positions.count > 1 } == false)
        run.held.releaseAll()
        #expect(await Poll.until(timeout: .seconds(20)) { run.held.positions.count == 2 })
        run.held.releaseAll()
        await run.stop()
    }
}
