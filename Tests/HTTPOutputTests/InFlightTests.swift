import Foundation
import GatewayCore
@testable import HTTPOutput
import DeliveryEngine
import GatewayTesting
import Testing

/// The http sink's use of the outbox's in-flight mark (the outbox itself is tested in DeliveryTests).
@Suite(.timeLimit(.minutes(3))) struct InFlightTests {
    func records(_ range: Range<Int>) -> [OutboxEntry] {
        range.map { OutboxEntry(id: "p\($0)", payload: Array(#"{"class":"TPV","id":"p\#($0)","mode":1,"datum":"wgs84"}"#.utf8), time: nil) }
    }

    @Test func aBatchInFlightAtACrashIsSentAgainWithTheSameKey() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = try configuration(#"{"url":"http://127.0.0.1:1/x","batch":{"max_positions":5},"queue":{"path":"\#(dir)/q.sqlite"}}"#)
        func sink(_ q: SQLiteOutbox) -> HTTPSink {
            HTTPSink(configuration: config, context: ComponentContext(id: "up", kind: .sink, logger: Logger(label: "t", handler: SilentLogHandler()), stats: ComponentStats(id: "up")), outbox: q)
        }
        let key: String
        do {
            let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
            _ = try q.append(records(0..<3), at: Timestamp(milliseconds: 0))
            let batch = try #require(try sink(q).prepareBatch())
            key = HTTPSink.idempotencyKey(batch.records)
            try q.markInFlight(through: try #require(batch.records.last?.seq), durably: true)
            // More positions arrive while the request is out; then the process dies.
            _ = try q.append(records(3..<10), at: Timestamp(milliseconds: 0))
        }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        let again = try #require(try sink(q).prepareBatch())
        #expect(again.records.map(\.id) == ["p0", "p1", "p2"])
        #expect(again.isFull)
        #expect(HTTPSink.idempotencyKey(again.records) == key)
        try q.remove(through: try #require(again.records.last?.seq))
        #expect(q.inFlightThrough == nil)
        #expect(try sink(q).prepareBatch()?.records.count == 5)
    }
}
