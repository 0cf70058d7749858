// Helper of Benchmarks/nats_sink.sh: sets up and inspects the benchmark's stream, and runs the
// reference it is compared with: synchronous JetStream publishing, one PubAck awaited per message.
//
//   NATSBenchmark create-stream SERVERS NAME SUBJECT REPLICAS
//   NATSBenchmark count SERVERS NAME
//   NATSBenchmark sync-publish SERVERS SUBJECT COUNT     prints "<messages> <seconds>"
//
// SERVERS is a comma-separated list of nats:// URLs.
import Foundation
import GatewayCore
import NATSClient
import PositionEncoding

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("NATSBenchmark: \(message)\n".utf8))
    exit(1)
}

func connect(_ servers: String) async throws -> NATSConnection {
    var o = NATSConnectionOptions()
    o.servers = servers.split(separator: ",").map(String.init)
    o.name = "locgate-benchmark"
    let c = try await NATSConnection.connect(o, jetStream: NATSJetStreamSettings(apiTimeout: .seconds(10))) { _ in }
    try await c.waitUntilConnected()
    return c
}

let args = CommandLine.arguments
guard args.count >= 3 else { fail("usage: create-stream | count | sync-publish SERVERS …") }
do {
    let c = try await connect(args[2])
    switch args[1] {
    case "create-stream" where args.count == 6:
        // The cluster may still be placing peers right after its meta leader appeared.
        var created = false
        for _ in 0..<100 where !created {
            do {
                _ = try await c.createStream(NATSStreamConfig(name: args[3], subjects: [args[4]], replicas: Int(args[5]) ?? 3,
                                                              duplicateWindow: .seconds(600), fileStorage: true))
                created = true
            } catch {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        if !created { fail("cannot create stream \(args[3])") }
    case "count" where args.count == 4:
        print(try await c.streamInfo(args[3])?.messages ?? 0)
    case "sync-publish" where args.count == 5:
        let n = Int(args[4]) ?? 0
        let subject = args[3]
        // The same body the sink sends: one position as locgate JSON.
        let base = Position(time: Timestamp(milliseconds: 1_714_521_600_000), latitude: 31.2, longitude: 121.5, altitude: 15.2,
                            speed: 1.6, course: 87.5, mode: .threeD, quality: .gps, satellites: 9, hdop: 0.9,
                            source: "rx", device: "bench", id: "")
        // Inline on purpose: nothing else runs in this process while it measures.
        let elapsed = try {
            let start = ContinuousClock.now
            for i in 0..<n {
                var p = base
                p.id = "sync-\(i)"
                var json: [UInt8] = []
                PositionJSON.append(p, to: &json)
                let r = try c.publishAndWaitNow(subject: subject, payload: json, messageID: p.id, timeout: .seconds(10))
                guard case .stored = r else { fail("message \(i): \(r)") }
            }
            return ContinuousClock.now - start
        }()
        print("\(n) \(elapsed.secondsDouble)")
    default:
        fail("unknown command or wrong arguments: \(args.dropFirst().joined(separator: " "))")
    }
    await c.close()
} catch {
    fail("\(error)")
}
