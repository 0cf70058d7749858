import Foundation
import GatewayCore
import PositionEncoding
@testable import HTTPOutput
import DeliveryEngine
import GatewayTesting
import Testing

@Suite struct ConfigurationTests {
    @Test func theSampleConfigurationReadsCleanly() throws {
        var sample = HTTPSinkPlugin.info.sample
        sample = sample.replacingOccurrences(of: "\"upload.sqlite\"", with: "\"/tmp/upload.sqlite\"")
        let c = try configuration(sample)
        #expect(c.maxPositions == 500)
        #expect(c.interval == .seconds(20))
        #expect(c.authorization == "Bearer secret")
        #expect(HTTPSinkPlugin.isDurable(c))
    }

    @Test func theReadmeTableHasOneRowPerOptionInOrder() throws {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("Plugins/HTTPOutput/README.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `") }.compactMap { line -> String? in
            let cell = line.split(separator: "|").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            return cell.hasPrefix("`") ? String(cell.dropFirst().prefix { $0 != "`" }) : nil
        }
        #expect(rows == HTTPSinkPlugin.info.options.map(\.name))
    }

    @Test func everyTopLevelKeyAskedForIsDocumented() throws {
        let o = try #require(try JSONValue.parse(string: #"{"url":"http://127.0.0.1:1/x","queue":null}"#).objectValue)
        var reader = OptionReader(object: o, path: "sinks.up", diagnostics: ConfigurationDiagnostics())
        _ = HTTPSinkPlugin.configure(&reader)
        let documented = Set(HTTPSinkPlugin.info.options.map { String($0.name.prefix { $0 != "." }) })
        #expect(Set(reader.askedKeys) == documented)
    }

    @Test func aMissingQueueIsAnErrorAndNullIsMemoryOnly() throws {
        let (_, problems) = try configure(#"{"url":"http://127.0.0.1:1/x"}"#)
        #expect(problems.contains { $0.hasPrefix("sinks.up.queue: required option is missing") })
        let c = try configuration(#"{"url":"http://127.0.0.1:1/x","queue":null}"#)
        #expect(!HTTPSinkPlugin.isDurable(c))
    }

    @Test(arguments: [
        (#"{"url":"ftp://x","queue":null}"#, "sinks.up.url"),
        (#"{"url":"http://x","queue":{}}"#, "sinks.up.queue.path"),
        (#"{"url":"http://x","queue":null,"batch":{"interval":"abc"}}"#, "sinks.up.batch.interval"),
        (#"{"url":"http://x","queue":null,"body":{"format":"template","template":{"a":1}}}"#, "sinks.up.body.template"),
        (#"{"url":"http://x","queue":null,"body":{"format":"template","fields":{"t":{"from":"time","time_format":"yyyy-QQ"}}}}"#, "sinks.up.body.fields.t.time_format"),
        (#"{"url":"http://x","queue":null,"body":{"format":"template","fields":{"t":"nothing"}}}"#, "sinks.up.body.fields.t"),
        (#"{"url":"http://x","queue":null,"success":{"json":{"path":"code"}}}"#, "sinks.up.success.json"),
        (#"{"url":"http://x","queue":null,"concurrency":2}"#, "sinks.up.concurrency"),
    ])
    func problemsAreReportedWithTheirPath(json: String, path: String) throws {
        let (_, problems) = try configure(json)
        #expect(problems.contains { $0.hasPrefix(path + ":") }, "\(problems)")
    }

    @Test func anUnwritableQueuePathFailsAtStartWithAClearMessage() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: dir + "/file", contents: Data()))
        let c = try configuration(#"{"url":"http://127.0.0.1:1/x","queue":{"path":"\#(dir)/file/q.sqlite"}}"#)
        #expect {
            _ = try Harness(c)
        } throws: { error in
            "\(error)".contains("q.sqlite") && "\(error)".contains("\(dir)/file: Not a directory")
        }
        let missing = try configuration(#"{"url":"http://127.0.0.1:1/x","queue":{"path":"\#(dir)/no/such/q.sqlite"}}"#)
        #expect(throws: OutboxError.self) { _ = try Harness(missing) }
    }
}

@Suite struct BodyTests {
    func sink(_ json: String, _ queue: any Outbox) throws -> HTTPSink {
        HTTPSink(configuration: try configuration(json), context: ComponentContext(id: "up", kind: .sink, logger: Logger(label: "t", handler: SilentLogHandler()), stats: ComponentStats(id: "up")), outbox: queue)
    }

    /// Commits positions through the sink's own encoder (the records are encoded then) and
    /// returns the body of the batch it would send.
    func body(_ json: String, _ ps: [Position]) throws -> String {
        let queue = MemoryOutbox(capacity: 1000)
        let sink = try sink(json, queue)
        _ = try queue.append(ps.map(sink.makeEncoder()), at: Timestamp(milliseconds: 0))
        let batch = try #require(try sink.prepareBatch())
        return String(decoding: batch.body, as: UTF8.self)
    }

    static let vipTemplate = #"""
        {"url":"http://x","queue":null,"body":{"format":"template",
          "template":{"vipId":"${VIP_ID}","list":"$positions"},
          "fields":{"date":{"from":"time","time_format":"yyyy-MM-dd HH:mm:ss","zone":"Asia/Shanghai"},
                    "latitude":"lat","longitude":"lon"}}}
        """#

    @Test func aQueuedRecordIsTheBytesThatWillBeSent() throws {
        let queue = MemoryOutbox(capacity: 1000)
        let sink = try sink(Self.vipTemplate, queue)
        _ = try queue.append(positions(0..<1).map(sink.makeEncoder()), at: Timestamp(milliseconds: 0))
        let record = try #require(try queue.oldest(limit: 1).first)
        #expect(record.key == HTTPSink.encodedKey)
        #expect(String(decoding: record.payload, as: UTF8.self) == #"{"date":"2024-05-01 18:00:00","latitude":31.2,"longitude":121.5}"#)
    }

    @Test func queuedRecordsKeepTheEncodingTheyWereCommittedWithAcrossAChangeOfBody() throws {
        let queue = MemoryOutbox(capacity: 1000)
        let before = try sink(Self.vipTemplate, queue)
        _ = try queue.append(positions(0..<1).map(before.makeEncoder()), at: Timestamp(milliseconds: 0))
        // A reload changes the template and its fields; one more position arrives.
        let after = try sink(#"{"url":"http://x","queue":null,"body":{"format":"template","template":{"v":2,"items":"$positions"},"fields":{"lat":"lat"}}}"#, queue)
        _ = try queue.append(positions(1..<2).map(after.makeEncoder()), at: Timestamp(milliseconds: 0))
        let batch = try #require(try after.prepareBatch())
        #expect(String(decoding: batch.body, as: UTF8.self)
                == #"{"v":2,"items":[{"date":"2024-05-01 18:00:00","latitude":31.2,"longitude":121.5},{"lat":31.20001}]}"#)
    }

    /// Queue files of earlier versions hold each position's JSON: encoded with the current body when sent.
    @Test func positionsQueuedByAnEarlierVersionAreEncodedWithTheCurrentBody() throws {
        let queue = MemoryOutbox(capacity: 1000)
        _ = try queue.append(positions(0..<2).map { p in
            var j: [UInt8] = []
            PositionJSON.append(p, to: &j)
            return OutboxEntry(id: p.id, payload: j, time: nil)
        }, at: Timestamp(milliseconds: 0))
        for (json, expected) in [
            (Self.vipTemplate, #"{"vipId":"vip-42","list":[{"date":"2024-05-01 18:00:00","latitude":31.2,"longitude":121.5},{"date":"2024-05-01 18:00:01","latitude":31.20001,"longitude":121.50001}]}"#),
            (#"{"url":"http://x","queue":null,"body":{"format":"jsonl"}}"#, nil),
        ] {
            let batch = try #require(try sink(json, queue).prepareBatch())
            let text = String(decoding: batch.body, as: UTF8.self)
            if let expected { #expect(text == expected) } else { #expect(text.split(separator: "\n").count == 2 && text.hasSuffix("}\n")) }
        }
    }

    @Test func theClassicVipIdPayload() throws {
        let text = try body(#"""
            {"url":"http://x","queue":null,"body":{"format":"template",
              "template":{"vipId":"${VIP_ID}","list":"$positions"},
              "fields":{"date":{"from":"time","time_format":"yyyy-MM-dd HH:mm:ss","zone":"Asia/Shanghai"},
                        "latitude":"lat","longitude":"lon"}}}
            """#, positions(0..<2))
        #expect(text == #"{"vipId":"vip-42","list":[{"date":"2024-05-01 18:00:00","latitude":31.2,"longitude":121.5},{"date":"2024-05-01 18:00:01","latitude":31.20001,"longitude":121.50001}]}"#)
    }

    @Test func ownTracksLocationObjects() throws {
        let text = try body(#"""
            {"url":"http://x","queue":null,"body":{"format":"template","template":"$positions",
              "fields":{"_type":{"value":"location"},"tst":{"from":"time","time_format":"epoch_s"},
                        "lat":"lat","lon":"lon","acc":{"from":"eph","decimals":0},"alt":{"from":"altMSL","decimals":0},
                        "vel":{"from":"speed","scale":3.6,"decimals":0},"cog":{"from":"track","decimals":0},
                        "tid":{"value":"gw"}}}}
            """#, positions(0..<1))
        #expect(text == #"[{"_type":"location","tst":1714557600,"lat":31.2,"lon":121.5,"acc":5,"alt":13,"vel":9,"cog":90,"tid":"gw"}]"#)
    }

    @Test(arguments: [
        ("iso8601", nil, #""2024-05-01T10:00:00.000Z""#),
        ("epoch_ms", nil, "1714557600000"),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "+05:30", #""2024-05-01T15:30:00.000+05:30""#),
        ("dd/MM/yy HH:mm", "America/New_York", #""01/05/24 06:00""#),
        ("yyyyMMddHHmmss", nil, #""20240501100000""#),
    ] as [(String, String?, String)])
    func timeFormats(format: String, zone: String?, expected: String) throws {
        let zoneJSON = zone.map { #","zone":"\#($0)""# } ?? ""
        let text = try body(#"{"url":"http://x","queue":null,"body":{"format":"template","fields":{"t":{"from":"time","time_format":"\#(format)"\#(zoneJSON)}}}}"#, positions(0..<1))
        #expect(text == "[{\"t\":\(expected)}]")
    }

    @Test func droppedAndRenamedFieldsAndAttributes() throws {
        var p = positions(0..<1)[0]
        p.attributes = ["fence": "park"]
        let text = try body(#"{"url":"http://x","queue":null,"body":{"format":"template","fields":{"uid":"id","where":"attributes.fence","missing":"attributes.none","sats":"uSat"}}}"#, [p])
        #expect(text == #"[{"uid":"t-0","where":"park","sats":9}]"#)
    }

    @Test(arguments: ["json_array", "jsonl", "geojson"])
    func builtInFormatsAreValidDocumentsCarryingIds(format: String) throws {
        let text = try body(#"{"url":"http://x","queue":null,"body":{"format":"\#(format)"}}"#, positions(0..<3))
        let docs = format == "jsonl" ? text.split(separator: "\n").map(String.init) : [text]
        for d in docs { #expect((try? JSONValue.parse(string: d)) != nil) }
        for i in 0..<3 { #expect(text.contains(#""id":"t-\#(i)""#)) }
    }

    @Test func maxBytesCutsTheBatch() throws {
        let text = try body(#"{"url":"http://x","queue":null,"batch":{"max_bytes":1024}}"#, positions(0..<20))
        #expect(text.utf8.count <= 1024)
        #expect(text.hasPrefix("[") && text.hasSuffix("]"))
    }

    @Test(arguments: [
        (#"{"path":"resultInteger","greater_than":0}"#, #"{"resultInteger":1}"#, true),
        (#"{"path":"resultInteger","greater_than":0}"#, #"{"resultInteger":0}"#, false),
        (#"{"path":"code","equals":0}"#, #"{"code":0,"msg":"ok"}"#, true),
        (#"{"path":"code","equals":0}"#, #"{"code":"0"}"#, false),
        (#"{"path":"data.0.ok","equals":true}"#, #"{"data":[{"ok":true}]}"#, true),
        (#"{"path":"code","equals":0}"#, "not json", false),
    ])
    func responsePredicates(predicate: String, answer: String, accepted: Bool) throws {
        let c = try configuration(#"{"url":"http://x","queue":null,"success":{"json":\#(predicate)}}"#)
        let p = try #require(c.successPredicate)
        #expect(p.accepts(Array(answer.utf8)) == accepted)
    }

    @Test func idempotencyKeysDependOnTheBatch() {
        func recs(_ ids: [String]) -> [OutboxRecord] { ids.enumerated().map { OutboxRecord(seq: Int64($0.offset), id: $0.element, payload: [], enqueuedAt: 0) } }
        let a = HTTPSink.idempotencyKey(recs(["a", "b", "c"]))
        // Every id counts: two batches that share only their ends are different batches.
        #expect(a == HTTPSink.idempotencyKey(recs(["a", "b", "c"])))
        #expect(a != HTTPSink.idempotencyKey(recs(["a", "x", "c"])))
        #expect(a != HTTPSink.idempotencyKey(recs(["a", "c"])))
        #expect(a != HTTPSink.idempotencyKey(recs(["a", "b", "d"])))
        #expect(a.count == 32)
    }

    @Test func retryAfterAsSecondsOrDate() {
        let now = Timestamp(year: 2024, month: 5, day: 1, hour: 10)
        #expect(HTTPSink.parseRetryAfter("3", now: now) == .seconds(3))
        #expect(HTTPSink.parseRetryAfter("Wed, 01 May 2024 10:00:07 GMT", now: now) == .seconds(7))
        #expect(HTTPSink.parseRetryAfter("soon", now: now) == nil)
    }

    @Test func gzipOutputHasTheGzipHeader() throws {
        let z = try Gzip.compress(Array(String(repeating: "position ", count: 100).utf8))
        #expect(z.starts(with: [0x1f, 0x8b]))
        #expect(z.count < 100)
    }
}
