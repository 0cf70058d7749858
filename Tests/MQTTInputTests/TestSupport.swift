import Foundation
import GatewayCore
import GatewayTesting
@testable import MQTTInput
import Locking
import MQTTTesting
import Testing

/// The options of the source `sources.phones`; any problem throws.
func configuration(_ json: String) throws -> MQTTSourceConfiguration {
    try PluginOptions.valid(MQTTSourcePlugin.self, json, path: "sources.phones")
}

/// What a running source emitted, with the acknowledgements it asked for held until the test
/// releases them (a sink that has not taken responsibility yet).
final class HeldOutput: Sendable {
    private let state = Locked<(positions: [Position], acks: [BatchAcknowledgement])>(([], []))
    /// True: acknowledge each batch as soon as it arrives (a sink that takes everything at once).
    let autoAcknowledge: Bool

    init(autoAcknowledge: Bool) { self.autoAcknowledge = autoAcknowledge }

    var output: SourceOutput {
        SourceOutput(tracking: { [self] batch, ack in
            ack?.retain()
            state.withLock { $0.positions += batch }
            if autoAcknowledge { ack?.release() } else if let ack { state.withLock { $0.acks.append(ack) } }
        })
    }

    var positions: [Position] { state.withLock { $0.positions } }

    /// Acknowledges every batch held so far.
    func releaseAll() {
        let acks = state.withLock { s in defer { s.acks = [] }; return s.acks }
        for a in acks { a.release() }
    }
}

/// One run of the source in process, on the real broker, until ``stop()``.
final class SourceRun: Sendable {
    let stats: ComponentStats
    let log: RecordingLogHandler
    let held: HeldOutput
    private let task: Task<Void, any Error>

    init(_ configuration: MQTTSourceConfiguration, autoAcknowledge: Bool = true, id: String = "phones") throws {
        stats = ComponentStats(id: id)
        log = RecordingLogHandler(minimumLevel: .debug)
        held = HeldOutput(autoAcknowledge: autoAcknowledge)
        let context = ComponentContext(id: id, kind: .source, logger: log.logger(label: "sources.\(id)"), stats: stats)
        let source = try MQTTSourcePlugin.makeSource(configuration, context: context)
        let output = held.output
        task = Task { try await source.run(output: output) }
    }

    /// Waits until the broker has our subscription (the log says so).
    func subscribed() async -> Bool {
        await Poll.until(timeout: .seconds(20)) { !self.log.entries(containing: "subscribed to").isEmpty }
    }

    /// Cancels the source and waits for it to end.
    func stop() async {
        task.cancel()
        _ = await task.result
    }
}

/// `mosquitto_pub -q 1` of one message per payload to `topic`, each a separate run (as phones do).
func publish(_ broker: MosquittoBroker, topic: String, _ payloads: [String]) throws {
    for payload in payloads {
        try MosquittoBroker.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(broker.port), "-u", broker.user, "-P", broker.password,
                                                           "-q", "1", "-t", topic, "-m", payload])
    }
}

/// `mosquitto_pub -q 1 -f file`: one message with a file's bytes (a large one).
func publishFile(_ broker: MosquittoBroker, topic: String, path: String) throws {
    try MosquittoBroker.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", String(broker.port), "-u", broker.user, "-P", broker.password,
                                                       "-q", "1", "-t", topic, "-f", path])
}

/// An OwnTracks location as the apps write it.
func ownTracks(tst: Int, lat: Double, lon: Double, acc: Int = 12, vel: Int = 36, cog: Int = 270, alt: Int = 41, batt: Int = 87, tid: String = "ph") -> String {
    #"{"_type":"location","tst":\#(tst),"lat":\#(lat),"lon":\#(lon),"acc":\#(acc),"vel":\#(vel),"cog":\#(cog),"alt":\#(alt),"batt":\#(batt),"tid":"\#(tid)","conn":"m","t":"u"}"#
}
