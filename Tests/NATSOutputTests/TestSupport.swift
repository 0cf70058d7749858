import Foundation
import GatewayCore
import GatewayRuntime
import GatewayTesting
@testable import NATSOutput
import NATSClient
import Testing

/// The package root, found from this file's path.
let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The nats sink under test, in this process.
typealias Harness = SinkHarness<NATSSinkPlugin>

/// Message ids in a stream, and how many times each appears.
func idCounts(_ messages: [NATSStoredMessage]) -> [String: Int] {
    var counts: [String: Int] = [:]
    for m in messages { counts[m.messageID ?? "<none>", default: 0] += 1 }
    return counts
}

/// How a stream's messages compare with the ids expected in it, in three numbers that print short.
struct Delivery: Equatable, CustomStringConvertible {
    /// Expected ids not in the stream.
    var missing = 0
    /// Extra copies of ids (a message stored twice counts 1).
    var duplicates = 0
    /// Messages whose id was not expected (or that have none).
    var unexpected = 0

    static let exact = Delivery()

    init() {}

    init(_ messages: [NATSStoredMessage], expected: some Sequence<String>) {
        let counts = idCounts(messages)
        let wanted = Set(expected)
        missing = wanted.filter { counts[$0] == nil }.count
        duplicates = counts.values.reduce(0) { $0 + max(0, $1 - 1) }
        unexpected = counts.filter { !wanted.contains($0.key) }.values.reduce(0, +)
    }

    var description: String { "missing \(missing), duplicates \(duplicates), unexpected \(unexpected)" }
}
