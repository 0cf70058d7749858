import Foundation
import GatewayCore
import GatewayTesting
@testable import DeliveryEngine
import Testing
import SQLiteStorage

func entries(_ range: Range<Int>, key: String = "", time: Int64? = nil) -> [OutboxEntry] {
    range.map { OutboxEntry(id: "p\($0)", key: key, payload: Array(#"{"class":"TPV","id":"p\#($0)","mode":1,"datum":"wgs84"}"#.utf8), time: time) }
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
}

@Suite struct OutboxStorageTests {
    @Test(arguments: [
        ([Int64](), [ClosedRange<Int64>]()),
        ([7], [7...7]),
        ([3, 1, 2], [1...3]),
        ([5, 1, 2, 3, 9, 10, 7, 2], [1...3, 5...5, 7...7, 9...10]),
    ])
    func acknowledgedSeqsAreDeletedAsRunsOfConsecutiveValues(seqs: [Int64], runs: [ClosedRange<Int64>]) {
        #expect(SQLiteOutbox.runs(of: seqs) == runs)
    }

    @Test func aRemovalOnTheOutboxThreadRemovesExactlyThoseRecords() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        _ = try q.append(entries(0..<10), at: Timestamp(milliseconds: 1000))
        let seqs = try q.oldest(limit: 10).map(\.seq)
        let result: Result<Void, any Error> = await withCheckedContinuation { c in
            q.remove([seqs[0], seqs[1], seqs[2], seqs[5], seqs[9]]) { c.resume(returning: $0) }
        }
        #expect((try? result.get()) != nil)
        #expect(q.depth == 5)
        #expect(try q.oldest(limit: 100).map(\.id) == ["p3", "p4", "p6", "p7", "p8"])
        // Closing waits for what was handed to the outbox's thread.
        q.remove([seqs[3]]) { _ in }
        q.close()
        let reopened = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        #expect(try reopened.oldest(limit: 100).map(\.id) == ["p4", "p6", "p7", "p8"])
    }

    @Test func theDiskOutboxSurvivesReopeningInOrder() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
            _ = try q.append(entries(0..<10), at: Timestamp(milliseconds: 1000))
            try q.remove(through: try q.oldest(limit: 3).last?.seq ?? 0)
        }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: true)
        #expect(q.depth == 7)
        #expect(q.oldestEnqueuedAt == 1000)
        #expect(try q.oldest(limit: 100).map(\.id) == (3..<10).map { "p\($0)" })
        #expect(FileManager.default.fileExists(atPath: dir + "/q.sqlite-wal"), "WAL mode keeps a -wal file while open")
    }

    @Test func aCleanCloseLeavesNoWALBehind() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        _ = try q.append(entries(0..<500), at: Timestamp(milliseconds: 0))
        #expect(fileSize(dir + "/q.sqlite-wal") > 0)
        q.close()
        #expect(!FileManager.default.fileExists(atPath: dir + "/q.sqlite-wal"))
        #expect(throws: OutboxError.self) { _ = try q.oldest(limit: 1) }
        let again = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        #expect(again.depth == 500)
    }

    /// The outage of the issue: 142,857 positions committed in batches while a sender reads the
    /// front again and again and nothing is ever delivered. The WAL used to grow without bound
    /// (53 MB) because a read statement was left open and no checkpoint could complete.
    @Test func theWALStaysBoundedDuringALongOutage() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1_000_000, synchronousFull: false)
        var largest = 0
        var n = 0
        while n < 142_857 {
            let batch = min(1000, 142_857 - n)
            _ = try q.append(entries(n..<(n + batch)), at: Timestamp(milliseconds: 0))
            _ = try q.oldest(limit: 500)
            _ = try q.newestSeq(forKey: "")
            n += batch
            largest = max(largest, fileSize(dir + "/q.sqlite-wal"))
        }
        #expect(q.depth == 142_857)
        #expect(largest > 0)
        #expect(largest < 8 << 20, "WAL grew to \(largest) bytes")
    }

    @Test func ageCountsFromTheFixTimeSoAClockStepDoesNotDropFreshFixes() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 1000, synchronousFull: false)
        let fix = Timestamp(year: 2026, month: 11, day: 30, hour: 8).milliseconds
        // A Pi without RTC commits these while its clock still says 1970 ...
        _ = try q.append(entries(0..<3, time: fix), at: Timestamp(milliseconds: 0))
        // ... then NTP steps the clock to the real time: the fixes are minutes old, not 56 years.
        let now = Timestamp(milliseconds: fix + 120_000)
        #expect(try q.dropOlder(than: Timestamp(milliseconds: now.milliseconds - 3_600_000)) == 0)
        #expect(q.depth == 3)
        // A record without a fix time ages from its commit.
        _ = try q.append(entries(3..<4), at: Timestamp(milliseconds: 0))
        #expect(try q.dropOlder(than: Timestamp(milliseconds: now.milliseconds - 3_600_000)) == 1)
        #expect(try q.oldest(limit: 10).map(\.id) == ["p0", "p1", "p2"])
        // A replayed log from 2024 (or a receiver 1024 weeks off) ages from its commit, not its fix.
        _ = try q.append(entries(4..<6, time: Timestamp(year: 2024, month: 5, day: 1).milliseconds), at: now)
        #expect(try q.dropOlder(than: Timestamp(milliseconds: now.milliseconds - 3_600_000)) == 0)
        #expect(q.depth == 5)
    }

    func both(_ dir: String, capacity: Int) throws -> [any Outbox] {
        [try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: capacity, synchronousFull: false), MemoryOutbox(capacity: capacity)]
    }

    @Test func theRecordCapDropsTheOldest() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for q in try both(dir, capacity: 5) {
            #expect(try q.append(entries(0..<4), at: Timestamp(milliseconds: 0)) == 0)
            #expect(try q.append(entries(4..<8), at: Timestamp(milliseconds: 0)) == 3)
            #expect(q.depth == 5)
            #expect(try q.oldest(limit: 10).map(\.id) == (3..<8).map { "p\($0)" })
        }
    }

    @Test func theAgeCapDropsRecordsCommittedTooLongAgo() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for q in try both(dir, capacity: 100) {
            _ = try q.append(entries(0..<3), at: Timestamp(milliseconds: 1000))
            _ = try q.append(entries(3..<5), at: Timestamp(milliseconds: 5000))
            #expect(try q.dropOlder(than: Timestamp(milliseconds: 2000)) == 3)
            #expect(q.oldestEnqueuedAt == 5000)
            #expect(try q.dropOlder(than: Timestamp(milliseconds: 2000)) == 0)
        }
    }

    @Test func acknowledgementsOutOfOrderRemoveExactlyThoseRecords() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for q in try both(dir, capacity: 100) {
            _ = try q.append(entries(0..<6), at: Timestamp(milliseconds: 0))
            let seqs = try q.oldest(limit: 6).map(\.seq)
            try q.remove([seqs[4], seqs[1], seqs[1], 999_999])
            #expect(q.depth == 4, "\(q.location)")
            #expect(try q.oldest(limit: 10).map(\.id) == ["p0", "p2", "p3", "p5"])
            #expect(try q.records(after: seqs[2], limit: 10).map(\.id) == ["p3", "p5"])
            #expect(try q.records(after: seqs[2], limit: 1).map(\.id) == ["p3"])
        }
    }

    @Test func theNewestRecordOfAKeyIsFound() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for q in try both(dir, capacity: 100) {
            _ = try q.append(entries(0..<2, key: "a") + entries(2..<3, key: "b") + entries(3..<5, key: "a"), at: Timestamp(milliseconds: 0))
            let all = try q.oldest(limit: 10)
            #expect(try q.newestSeq(forKey: "a") == all[4].seq)
            #expect(try q.newestSeq(forKey: "b") == all[2].seq)
            #expect(try q.newestSeq(forKey: "c") == nil)
            #expect(all.map(\.key) == ["a", "a", "b", "a", "a"])
        }
    }

    @Test func deadLettersKeepThePeersAnswer() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 100, synchronousFull: true)
        _ = try q.append(entries(0..<4), at: Timestamp(milliseconds: 0))
        let all = try q.oldest(limit: 4)
        try q.deadLetter([all[0], all[2]], status: 400, answer: #"{"error":"bad"}"#, at: Timestamp(milliseconds: 9))
        #expect(try q.deadLetterCount() == 2)
        #expect(q.depth == 2)
        #expect(try q.oldest(limit: 10).map(\.id) == ["p1", "p3"])
    }

    /// A dead letter keeps its key (a topic, an http record's encoding, a postgres event), and a
    /// queue file whose dead-letter table predates it gains the column in place.
    @Test func deadLettersKeepTheirKeyAlsoInAnOlderQueueFile() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = """
            CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, position TEXT NOT NULL, enqueued_ms INTEGER NOT NULL, key TEXT NOT NULL DEFAULT '');
            CREATE TABLE dead_letters (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, position TEXT NOT NULL, enqueued_ms INTEGER NOT NULL, failed_ms INTEGER NOT NULL, status INTEGER NOT NULL, answer TEXT NOT NULL);
            INSERT INTO dead_letters VALUES (100, 'old', '{}', 5, 6, 400, 'no');
            """
        #expect(Tmpfs.sh("sqlite3 '\(dir)/q.sqlite' \"\(old)\"") == 0)
        do {
            let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 100, synchronousFull: true)
            _ = try q.append(entries(0..<2, key: "fleet/van-1"), at: Timestamp(milliseconds: 7))
            try q.deadLetter(try q.oldest(limit: 1), status: 0, answer: "too big", at: Timestamp(milliseconds: 9))
            q.close()
        }
        let c = try SQLiteConnection(path: dir + "/q.sqlite", readOnly: true)
        defer { c.close() }
        #expect(try c.queryTexts("SELECT id || '=' || key FROM dead_letters ORDER BY seq") == ["p0=fleet/van-1", "old="])
    }

    /// Queue files written by the http sink before the outbox had keys open and keep their rows.
    @Test func aQueueFileWithoutTheKeyColumnIsUpgradedInPlace() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let old = """
            CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, position TEXT NOT NULL, enqueued_ms INTEGER NOT NULL);
            INSERT INTO pending (id, position, enqueued_ms) VALUES ('old1', '{}', 5), ('old2', '{}', 6);
            """
        #expect(Tmpfs.sh("sqlite3 '\(dir)/q.sqlite' \"\(old)\"") == 0)
        let q = try SQLiteOutbox(path: dir + "/q.sqlite", maxRecords: 100, synchronousFull: true)
        #expect(q.depth == 2)
        _ = try q.append(entries(0..<1, key: "k"), at: Timestamp(milliseconds: 7))
        #expect(try q.oldest(limit: 5).map(\.id) == ["old1", "old2", "p0"])
        #expect(try q.oldest(limit: 5).map(\.key) == ["", "", "k"])
    }

    /// Only records with a key (an mqtt topic) are in the key's index: a full index cost every
    /// insert and delete of the other sinks an entry. A file of an earlier version loses its full
    /// index, and the newest record of a key is still found.
    @Test func onlyRecordsWithAKeyAreIndexedByIt() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/q.sqlite"
        let old = """
            CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, position TEXT NOT NULL, enqueued_ms INTEGER NOT NULL, key TEXT NOT NULL DEFAULT '');
            CREATE INDEX pending_key ON pending (key, seq);
            """
        #expect(Tmpfs.sh("sqlite3 '\(path)' \"\(old)\"") == 0)
        let q = try SQLiteOutbox(path: path, maxRecords: 100, synchronousFull: true)
        _ = try q.append(entries(0..<3) + entries(3..<5, key: "fleet/a") + entries(5..<6), at: Timestamp(milliseconds: 7))
        let all = try q.oldest(limit: 10)
        #expect(try q.newestSeq(forKey: "fleet/a") == all[4].seq)
        #expect(try q.newestSeq(forKey: "") == all[5].seq)
        #expect(try q.newestSeq(forKey: "fleet/b") == nil)
        q.close()
        let c = try SQLiteConnection(path: path, readOnly: true)
        defer { c.close() }
        #expect(try c.queryTexts("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'pending' ORDER BY name") == ["pending_late", "pending_topic"])
        // Entries in the index's pages (dbstat): the two keyed records only.
        #expect(try c.queryInt("SELECT sum(ncell) FROM dbstat WHERE name = 'pending_topic' AND pagetype = 'leaf'") == 2)
    }
    /// Records younger than one before them (a fix ahead of the clock, a clock stepped back) go in
    /// `late`, and only those are in the age index; the oldest and the expired are still exact,
    /// after a reopen too, and a file of an earlier version (no `late`: all its records late)
    /// loses its index of every age.
    @Test func onlyRecordsOutOfAgeOrderAreIndexedByAge() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/q.sqlite"
        let old = """
            CREATE TABLE pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, position TEXT NOT NULL, enqueued_ms INTEGER NOT NULL, key TEXT NOT NULL DEFAULT '');
            CREATE INDEX pending_age ON pending (enqueued_ms);
            INSERT INTO pending (id, position, enqueued_ms) VALUES ('old1', '{}', 3000), ('old2', '{}', 500);
            """
        #expect(Tmpfs.sh("sqlite3 '\(path)' \"\(old)\"") == 0)
        do {
            let q = try SQLiteOutbox(path: path, maxRecords: 100, synchronousFull: false)
            #expect(q.oldestEnqueuedAt == 500)
            // Commits at 10 s; p1's fix is 50 s ahead of the clock, so p2 and p3 come in late.
            _ = try q.append(entries(0..<1) + entries(1..<2, time: 60_000) + entries(2..<4), at: Timestamp(milliseconds: 10_000))
            // The clock stepped back: p4 is older than p1 (late); p5 (70 s) is in order again.
            _ = try q.append(entries(4..<5), at: Timestamp(milliseconds: 8_000))
            _ = try q.append(entries(5..<6), at: Timestamp(milliseconds: 70_000))
            #expect(q.oldestEnqueuedAt == 500)
            #expect(try q.dropOlder(than: Timestamp(milliseconds: 9_000)) == 3)
            #expect(try q.oldest(limit: 10).map(\.id) == ["p0", "p1", "p2", "p3", "p5"])
            #expect(q.oldestEnqueuedAt == 10_000)
            q.close()
        }
        let c = try SQLiteConnection(path: path, readOnly: true)
        #expect(try c.queryTexts("SELECT id FROM pending WHERE late ORDER BY seq") == ["p2", "p3"])
        #expect(try c.queryInt("SELECT sum(ncell) FROM dbstat WHERE name = 'pending_late' AND pagetype = 'leaf'") == 2)
        #expect(try c.queryTexts("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'pending_age'") == [])
        c.close()
        // Reopened, the newest record in order (p5, 70 s) decides what is late.
        let q = try SQLiteOutbox(path: path, maxRecords: 100, synchronousFull: false)
        defer { q.close() }
        #expect(q.oldestEnqueuedAt == 10_000)
        _ = try q.append(entries(6..<7), at: Timestamp(milliseconds: 65_000))
        try q.remove(through: try q.oldest(limit: 1)[0].seq)
        #expect(q.oldestEnqueuedAt == 10_000)
        #expect(try q.dropOlder(than: Timestamp(milliseconds: 66_000)) == 4)
        #expect(try q.oldest(limit: 10).map(\.id) == ["p5"])
        #expect(q.oldestEnqueuedAt == 70_000)
    }
}
