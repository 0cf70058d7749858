import Foundation
import GatewayCore
@testable import GatewayRuntime
import GatewayTesting
import Locking
import SQLiteState
import Testing

/// The state a batch changed is saved once the batch is acknowledged end to end, and the
/// acknowledgement goes upstream only after it is saved (issue 30: exactly the acknowledged history).
@Suite(.timeLimit(.minutes(1)))
struct StateKeeperTests {
    /// Remembers the last position id per device.
    struct LastID: StatefulTransform {
        var devices = DeviceTable<String>()
        mutating func process(_ position: Position, into output: inout [Position]) {
            devices[position.deviceKey] = position.id
            output.append(position)
        }
        var stateFormat: String { "last_id/1" }
        mutating func recordStateChanges() { devices.recordChanges() }
        mutating func takeChangedDevices() -> [String] { devices.takeChanged() }
        func snapshot(device: String) -> JSONValue? { devices[device].map { .string($0) } }
        mutating func restore(device: String, from snapshot: JSONValue) throws(StateSnapshotError) {
            guard let id = snapshot.stringValue else { throw StateSnapshotError("expected a string") }
            devices[device] = id
        }
    }

    final class Flag: Sendable {
        private let value = Locked(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    func position(_ id: String, device: String = "a") -> Position {
        Position(time: Timestamp(milliseconds: 1_700_000_000_000), latitude: 1, longitude: 2, source: "s", device: device, id: id)
    }

    @Test func stateIsSavedWhenTheSinksAcknowledgeAndBeforeTheSourceHears() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.sqlite"
        let store = try SQLiteStateStore(path: path)
        defer { store.close() }
        let logs = RecordingLogHandler()
        let context = ComponentContext(id: "last", kind: .transform, logger: logs.logger(label: "transforms.last"), stats: ComponentStats(id: "transforms.last"))
        var transform: any PositionTransform = LastID()
        let keeper = try #require(TransformStateKeeper.restore(&transform, id: "last", store: store, context: context))
        let node = Pipeline.TransformNode(id: "last", transform: transform, stats: context.stats, keeper: keeper)
        let buffer = SinkBuffer(capacity: 100, policy: .block, durable: false, stats: ComponentStats(id: "sinks.s"))

        let savedWhenHeard = Locked<[String]?>(nil)
        let heard = Flag()
        await SourceOutput(tracking: { batch, ack in
            await Pipeline.route(batch, to: [.transform(node, [.sink(buffer)])], acknowledgement: ack)
        }).emit([position("p1"), position("p2"), position("q1", device: "b")]) {
            savedWhenHeard.withLock { $0 = (try? SQLiteStateStore.read(path: path))?.map { "\($0.device)=\($0.state!.jsonText)" } }
            heard.set()
        }
        // The sink has the batch but has not acknowledged it: nothing saved, the source not told.
        #expect(buffer.depth == 3)
        // A negative cannot be awaited: give a wrongly early write time to land.
        try await Task.sleep(for: .milliseconds(100))
        #expect(try SQLiteStateStore.read(path: path).isEmpty, "saved before the sink acknowledged")
        #expect(!heard.isSet)
        _ = await buffer.next(timeout: nil)
        buffer.acknowledge()
        #expect(await Poll.until { heard.isSet })
        #expect(savedWhenHeard.withLock { $0 } == [#"a="p2""#, #"b="q1""#], "the source heard before the state was saved")
        #expect(context.stats.value("state.writes") == 2)
        #expect(context.stats.value("state.devices") == 2)

        // A new instance restores it.
        var again: any PositionTransform = LastID()
        _ = TransformStateKeeper.restore(&again, id: "last", store: store, context: context)
        #expect((again as? LastID)?.devices["a"] == "p2")
        #expect(!logs.entries(containing: "restored the state of 2 device(s)").isEmpty)
    }
}

/// A shared state store's compare-and-swap refusal stops the source that fed the device, counted
/// and logged (issue 30: "the loser logs and stops that partition"); the other sources go on.
@Suite(.timeLimit(.minutes(1)))
struct StateConflictTests {
    /// A store in which another gateway owns device "taken": every write of it is refused.
    final class ContestedStore: DeviceStateStore {
        let location = "test store"
        func load(transform: String) throws -> [DeviceStateRecord] { [] }
        func write(_ changes: [DeviceStateRecord], sequence: UInt64, completion: @escaping @Sendable ((any Error)?) -> Void) {
            let taken = changes.filter { $0.device == "taken" }.map { "\($0.transform)/\($0.device)" }
            completion(taken.isEmpty ? nil : DeviceStateStoreError.conflict(devices: taken, detail: "revision 7, this gateway knew 5"))
        }
        func close() {}
    }

    /// Emits one device's positions, each batch with an acknowledgement, until stopped; paced
    /// (a millisecond apart) so it leaves the machine's cores to the rest of the suite.
    struct EndlessSource: PositionSource {
        let device: String
        func run(output: SourceOutput) async throws {
            var i = 0
            while true {
                try Task.checkCancellation()
                i += 1
                await output.emit([Position(time: Timestamp(milliseconds: 1_700_000_000_000 + Int64(i)), latitude: 1, longitude: 2,
                                            source: "s", device: device, id: "\(device)-\(i)")]) {}
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    @Test func theSourceOfAContestedDeviceStopsAndTheOthersGoOn() async throws {
        func source(_ id: String, _ device: String) -> PipelineConfiguration.Component {
            .init(id: id, kind: .source, type: "test", prepared: PreparedComponent { _ in .source(EndlessSource(device: device)) })
        }
        var settings = PipelineConfiguration.Settings(shutdownTimeout: .seconds(5), statsInterval: nil)
        settings.state.backend = PreparedStateBackend(key: "test", location: "test store", fingerprint: .null, configuration: 0) { _, _ in ContestedStore() }
        let recorder = Recorder()
        let config = PipelineConfiguration(
            sources: [source("contested", "taken"), source("mine", "free")],
            transforms: [.init(id: "last", kind: .transform, type: "test", inputs: ["contested", "mine"],
                               prepared: PreparedComponent { _ in .transform(StateKeeperTests.LastID()) })],
            sinks: [.init(id: "out", kind: .sink, type: "test", inputs: ["last"], prepared: PreparedComponent { _ in .sink(RecordingSink(recorder: recorder)) })],
            settings: settings)
        let logs = RecordingLogHandler()
        let p = try Pipeline(configuration: config, logHandler: logs)
        async let code = p.run()
        let stats = { (id: String) in p.componentStats.first { $0.id == id } }
        #expect(await Poll.until { stats("sources.contested")?.value("state.conflict_stops") == 1 })
        #expect((stats("transforms.last")?.value("state.conflicts") ?? 0) >= 1)
        // The other source goes on after the stop.
        let before = recorder.all.filter { $0.device == "free" }.count
        #expect(await Poll.until { recorder.all.filter { $0.device == "free" }.count > before + 100 })
        #expect(stats("sources.mine")?.value("state.conflict_stops") == 0)
        #expect(!logs.entries(level: .error, containing: "written by another gateway").isEmpty)
        #expect(!logs.entries(level: .error, containing: "stopping this source").isEmpty)
        p.shutdown(reason: "test over")
        #expect(await code == 0)
    }
}
