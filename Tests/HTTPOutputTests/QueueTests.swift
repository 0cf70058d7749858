import Foundation
import GatewayCore
@testable import HTTPOutput
import Testing

@Suite struct QueueTests {
    func records(_ range: Range<Int>) -> [(id: String, json: [UInt8])] {
        range.map { ("p\($0)", Array(#"{"class":"TPV","id":"p\#($0)","mode":1,"datum":"wgs84"}"#.utf8)) }
    }

    @Test func theDiskQueueSurvivesReopeningInOrder() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let q = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
            _ = try q.append(records(0..<10), at: Timestamp(milliseconds: 1000))
            try q.remove(through: try q.oldest(limit: 3).last?.seq ?? 0)
        }
        let q = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        #expect(q.depth == 7)
        #expect(q.oldestEnqueuedAt == 1000)
        #expect(try q.oldest(limit: 100).map(\.id) == (3..<10).map { "p\($0)" })
        let journal = try String(contentsOfFile: dir + "/q.sqlite-wal", encoding: .isoLatin1)
        #expect(!journal.isEmpty, "WAL mode keeps a -wal file beside the queue")
    }

    @Test func ageCountsFromTheFixTimeSoAClockStepDoesNotDropFreshFixes() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        let fix = Timestamp(year: 2026, month: 11, day: 30, hour: 8).milliseconds
        // A Pi without RTC commits these while its clock still says 1970 ...
        _ = try q.append(records(0..<3).map { ($0.id, $0.json, fix) }, at: Timestamp(milliseconds: 0))
        // ... then NTP steps the clock to the real time: the fixes are minutes old, not 56 years.
        let now = Timestamp(milliseconds: fix + 120_000)
        #expect(try q.dropOlder(than: Timestamp(milliseconds: now.milliseconds - 3_600_000)) == 0)
        #expect(q.depth == 3)
        // A record without a fix time ages from its commit.
        _ = try q.append(records(3..<4), at: Timestamp(milliseconds: 0))
        #expect(try q.dropOlder(than: Timestamp(milliseconds: now.milliseconds - 3_600_000)) == 1)
        #expect(try q.oldest(limit: 10).map(\.id) == ["p0", "p1", "p2"])
        // A replayed log from 2024 (or a receiver 1024 weeks off) ages from its commit, not its fix.
        _ = try q.append(records(4..<6).map { ($0.id, $0.json, Timestamp(year: 2024, month: 5, day: 1).milliseconds) }, at: now)
        #expect(try q.dropOlder(than: Timestamp(milliseconds: now.milliseconds - 3_600_000)) == 0)
        #expect(q.depth == 5)
    }

    @Test func aBatchInFlightAtACrashIsSentAgainWithTheSameKey() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = try configuration(#"{"url":"http://127.0.0.1:1/x","batch":{"max_positions":5},"queue":{"path":"\#(dir)/q.sqlite"}}"#)
        func sink(_ q: DurableQueue) -> HTTPSink {
            HTTPSink(configuration: config, context: ComponentContext(id: "up", kind: .sink, logger: Logger(label: "t", handler: SilentLogHandler()), stats: ComponentStats(id: "up")), queue: q)
        }
        let key: String
        do {
            let q = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
            _ = try q.append(records(0..<3), at: Timestamp(milliseconds: 0))
            let batch = try #require(try sink(q).prepareBatch())
            key = HTTPSink.idempotencyKey(batch.records)
            try q.markInFlight(through: try #require(batch.records.last?.seq))
            // More positions arrive while the request is out; then the process dies.
            _ = try q.append(records(3..<10), at: Timestamp(milliseconds: 0))
        }
        let q = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        let again = try #require(try sink(q).prepareBatch())
        #expect(again.records.map(\.id) == ["p0", "p1", "p2"])
        #expect(again.isFull)
        #expect(HTTPSink.idempotencyKey(again.records) == key)
        try q.remove(through: try #require(again.records.last?.seq))
        #expect(q.inFlightThrough == nil)
        #expect(try sink(q).prepareBatch()?.records.count == 5)
    }

    @Test func theRecordCapDropsTheOldest() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 5, synchronousFull: false)
        let memory = MemoryQueue(capacity: 5)
        for q in [disk, memory] as [any PositionQueue] {
            #expect(try q.append(records(0..<4), at: Timestamp(milliseconds: 0)) == 0)
            #expect(try q.append(records(4..<8), at: Timestamp(milliseconds: 0)) == 3)
            #expect(q.depth == 5)
            #expect(try q.oldest(limit: 10).map(\.id) == (3..<8).map { "p\($0)" })
        }
    }

    @Test func theAgeCapDropsRecordsCommittedTooLongAgo() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let disk = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 100, synchronousFull: false)
        for q in [disk, MemoryQueue(capacity: 100)] as [any PositionQueue] {
            _ = try q.append(records(0..<3), at: Timestamp(milliseconds: 1000))
            _ = try q.append(records(3..<5), at: Timestamp(milliseconds: 5000))
            #expect(try q.dropOlder(than: Timestamp(milliseconds: 2000)) == 3)
            #expect(q.oldestEnqueuedAt == 5000)
            #expect(try q.dropOlder(than: Timestamp(milliseconds: 2000)) == 0)
        }
    }

    @Test func deadLettersKeepTheServersAnswer() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try DurableQueue(path: dir + "/q.sqlite", maxRecords: 100, synchronousFull: true)
        _ = try q.append(records(0..<4), at: Timestamp(milliseconds: 0))
        try q.deadLetter(try q.oldest(limit: 2), status: 400, answer: #"{"error":"bad"}"#, at: Timestamp(milliseconds: 9))
        #expect(try q.deadLetterCount() == 2)
        #expect(q.depth == 2)
        #expect(try q.oldest(limit: 10).map(\.id) == ["p2", "p3"])
    }
}
