import GatewayCore
import Locking

/// A source that emits a fixed list of positions in batches, then ends (or waits for cancellation).
struct ListSource: PositionSource {
    var positions: [Position]
    var batchSize = 10
    var waitForCancellation = false

    func run(output: SourceOutput) async throws {
        var i = 0
        while i < positions.count {
            await output.emit(Array(positions[i..<min(positions.count, i + batchSize)]))
            i += batchSize
        }
        if waitForCancellation {
            while true { try await Task.sleep(for: .milliseconds(10)) }
        }
    }
}

/// Keeps every other position; holds the last one until `finish`.
struct EveryOther: PositionTransform {
    var n = 0
    var held: Position?
    mutating func process(_ position: Position, into output: inout [Position]) {
        n += 1
        if n % 2 == 1 { output.append(position) } else { held = position }
    }
    mutating func finish(into output: inout [Position]) {
        if let held { output.append(held) }
    }
}

/// A sink that records what it got, optionally slowly or failing.
final class Recorder: Sendable {
    let positions = Locked<[Position]>([])
    var all: [Position] { positions.withLock { $0 } }
}

struct RecordingSink: PositionSink {
    let recorder: Recorder
    var delayPerBatch: Duration = .zero
    var failAfter: Int?

    func run(input: any SinkInput) async throws {
        while let batch = await input.next() {
            if delayPerBatch > .zero { try await Task.sleep(for: delayPerBatch) }
            recorder.positions.withLock { $0.append(contentsOf: batch) }
            input.acknowledge()
            if let f = failAfter, recorder.all.count >= f { throw TestFailure() }
        }
    }
}

struct TestFailure: Error, CustomStringConvertible { var description: String { "deliberate test failure" } }

func track(_ n: Int, source: String = "src") -> [Position] {
    (0..<n).map { i in
        Position(time: Timestamp(milliseconds: 1_700_000_000_000 + Int64(i) * 1000),
                 latitude: 31 + Double(i) * 1e-4, longitude: 121, mode: .threeD, source: source, id: "\(source)-\(i)")
    }
}

/// Test plugins registered beside the built-in ones, for configuration tests.
enum PassthroughPlugin: TransformPlugin {
    struct Configuration: Sendable { var factor: Double }
    static let info = PluginInfo(type: "passthrough", kind: .transform, summary: "test", folder: "-",
                                 options: [OptionSpec("factor", "number", default: "1", "test")],
                                 sample: #"{"type":"passthrough","inputs":["a"]}"#)
    static func configure(_ options: inout OptionReader) -> Configuration {
        Configuration(factor: options.double("factor", default: 1, in: 0...10))
    }
    struct T: PositionTransform {
        mutating func process(_ position: Position, into output: inout [Position]) { output.append(position) }
    }
    static func makeTransform(_ configuration: Configuration, context: ComponentContext) throws -> any PositionTransform { T() }
}
