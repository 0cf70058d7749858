import GatewayCore
import GatewayTesting
import NMEA
import NTRIP
import Testing

/// The parts of NTRIP without sockets: chunked decoding, answers, the sourcetable, GGA, URLs.
@Suite struct NTRIPProtocolTests {
    static func chunked(_ body: [UInt8], sizes: [Int], extensions: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        var k = 0
        while i < body.count {
            let n = min(sizes[k % sizes.count], body.count - i)
            out += Array((String(n, radix: 16) + (extensions ? ";name=value" : "") + "\r\n").utf8) + body[i..<(i + n)] + [13, 10]
            i += n
            k += 1
        }
        return out + Array("0\r\nX-Trailer: 1\r\n\r\n".utf8)
    }

    static func decode(_ bytes: [UInt8], reads: Int) throws -> (body: [UInt8], finished: Bool) {
        var d = HTTPChunkedDecoder()
        var body: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(reads, bytes.count - i)
            try bytes[i..<(i + n)].withUnsafeBytes { raw in try d.feed(raw) { body += $0 } }
            i += n
        }
        return (body, d.isFinished)
    }

    @Test(arguments: [1, 2, 3, 7, 100, 100_000])
    func chunkedBodiesDecodeWhateverTheReads(reads: Int) throws {
        var rng = SeededGenerator(seed: 7)
        let body = (0..<3000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        for (sizes, ext) in [([1], false), ([17, 400, 3], true), ([4096], false)] {
            let (decoded, finished) = try Self.decode(Self.chunked(body, sizes: sizes, extensions: ext), reads: reads)
            #expect(decoded == body)
            #expect(finished)
        }
    }

    @Test func badChunkSizesAndMissingTerminatorsAreErrors() {
        #expect(throws: HTTPChunkedDecoder.Failure.badChunkSize("zz")) { try Self.decode(Array("zz\r\nabc".utf8), reads: 100) }
        #expect(throws: HTTPChunkedDecoder.Failure.missingChunkTerminator) { try Self.decode(Array("3\r\nabcX".utf8), reads: 2) }
        #expect(throws: HTTPChunkedDecoder.Failure.lineTooLong) { try Self.decode([UInt8](repeating: 0x31, count: 5000), reads: 512) }
    }

    @Test func answersOfBothVersionsAreUnderstood() throws {
        func parse(_ s: String, _ tail: [UInt8] = []) throws -> (NTRIPResponseHead, Int)? { try NTRIPResponseHead.parse(Array(s.utf8) + tail) }
        // RTKLIB: the data right after the status line.
        let rtcm: [UInt8] = [0xD3, 0x00, 0x13]
        let icy = try #require(try parse("ICY 200 OK\r\n", rtcm))
        #expect(icy.0.kind == .data && icy.1 == 12)
        // Others: headers and a blank line first.
        let icyHeaders = try #require(try parse("ICY 200 OK\r\nServer: caster\r\nDate: x\r\n\r\n", rtcm))
        #expect(icyHeaders.0.headers["server"] == "caster" && icyHeaders.1 == 39)
        // The status line alone (str2str before it has data): the data starts after it.
        #expect(try parse("ICY 200 OK\r\n")?.1 == 12)
        #expect(try parse("ICY 200") == nil)
        // A head cut by the end of the connection: what is there.
        #expect(try NTRIPResponseHead.parse(Array("HTTP/1.0 401 Unauthorized\r\n".utf8), atEnd: true)?.0.kind == .unauthorized)
        #expect(try NTRIPResponseHead.parse(Array("HTTP/1.0 401 Unauthorized\r\n".utf8)) == nil)
        let v2 = try #require(try parse("HTTP/1.1 200 OK\r\nNtrip-Version: Ntrip/2.0\r\nContent-Type: gnss/data\r\nTransfer-Encoding: chunked\r\n\r\n", rtcm))
        #expect(v2.0.kind == .data && v2.0.chunked)
        #expect(try parse("HTTP/1.1 200 OK\r\nContent-Type: gnss/sourcetable\r\n\r\n")?.0.kind == .sourcetable)
        #expect(try parse("SOURCETABLE 200 OK\r\nContent-Length: 10\r\n\r\n")?.0.kind == .sourcetable)
        #expect(try parse("HTTP/1.0 401 Unauthorized\r\n\r\n")?.0.kind == .unauthorized)
        #expect(try parse("HTTP/1.1 404 Not Found\r\n\r\n")?.0.kind == .refused(404, "Not Found"))
        #expect(throws: NTRIPResponseHead.Failure.self) { try parse("SSH-2.0-OpenSSH\r\n") }
        #expect(throws: NTRIPResponseHead.Failure.self) { try parse("garbage") }
    }

    static let table = """
    CAS;rtk2go.com;2101;RTK2GO;SNIP;0;USA;37.00;-122.00;0.0.0.0;0;http://rtk2go.com
    NET;SNIP;RTK2GO;B;N;http://rtk2go.com;none;none;none
    STR;VRS_RTCM32;Network RTK;RTCM 3.2;1004(1),1005(10),1077(1),1087(1);2;GPS+GLO;NET;AUT;48.21;16.37;1;1;sNTRIP;none;B;N;9600;misc;with;semicolons
    STR;BASE1;Vienna;RTCM 3.3;1005(10),1077(1);2;GPS+GAL;SNIP;AUT;48.20;16.40;0;0;sNTRIP;none;N;N;4800;
    STR;MOUNT;srctbl.txt
    ENDSOURCETABLE
    """

    @Test func theSourcetableIsReadLeniently() throws {
        let t = NTRIPSourcetable(text: Self.table.replacingOccurrences(of: "\n", with: "\r\n"))
        #expect(t.complete)
        #expect(t.streams.map(\.mountpoint) == ["VRS_RTCM32", "BASE1", "MOUNT"])
        let vrs = try #require(t.stream("VRS_RTCM32"))
        #expect(vrs.wantsNMEA && vrs.solution == 1 && vrs.format == "RTCM 3.2" && vrs.carrier == 2)
        #expect(vrs.latitude == 48.21 && vrs.longitude == 16.37 && vrs.authentication == "B" && !vrs.fee && vrs.bitrate == 9600)
        #expect(vrs.miscellaneous == "misc;with;semicolons")
        #expect(t.stream("BASE1")?.wantsNMEA == false)
        // RTKLIB's three fields.
        #expect(t.stream("MOUNT")?.identifier == "srctbl.txt" && t.stream("MOUNT")?.wantsNMEA == false)
        #expect(t.otherRecords.count == 2)
        #expect(t.stream("vrs_rtcm32") == nil, "mountpoints are case-sensitive")
        #expect(!NTRIPSourcetable(text: "STR;A;b\r\n").complete)
    }

    @Test func ggaCarriesTheFixWithAValidChecksum() throws {
        var p = Position(datum: .wgs84, source: "gnss")
        p.time = Timestamp(iso8601: "2026-03-01T12:34:56.789Z")
        p.mode = .threeD
        p.quality = .rtkFloat
        p.latitude = 48.2082
        p.longitude = -16.3738
        p.altitude = 171.25
        p.satellites = 21
        p.hdop = 0.64
        let gga = try #require(GGASentence.sentence(for: p, now: Timestamp(milliseconds: 0)))
        #expect(gga == NMEAChecksum.sentence(body: "GPGGA,123456.78,4812.4920000,N,01622.4280000,W,5,21,0.6,171.3,M,0.0,M,,"))
        #expect(gga.hasSuffix("\r\n"))
        // The decoder locgate reads NMEA with takes it back to the same place.
        var decoder = NMEADecoder(options: NMEAOptions())
        var out: [Position] = []
        Array(gga.utf8).withUnsafeBytes { decoder.decode($0, into: &out) }
        decoder.flush(into: &out)
        #expect(out.count == 1 && abs((out.first?.latitude ?? 0) - 48.2082) < 1e-9 && abs((out.first?.longitude ?? 0) + 16.3738) < 1e-9)
        // No fix, no GGA.
        p.mode = .noFix
        #expect(GGASentence.sentence(for: p, now: Timestamp(milliseconds: 0)) == nil)
    }

    @Test func urlsGiveHostPortMountpointAndCredentials() throws {
        let c = try NTRIPConfiguration.parse(url: "ntrip://ana:p%40ss@caster.example:2102/VRS_RTCM32").get()
        #expect(c.host == "caster.example" && c.port == 2102 && c.mountpoint == "VRS_RTCM32" && c.user == "ana" && c.password == "p@ss")
        #expect(c.display == "caster.example:2102/VRS_RTCM32")
        #expect(try NTRIPConfiguration.parse(url: "http://[::1]/M").get().host == "::1")
        #expect(try NTRIPConfiguration.parse(url: "rtk2go.com").get().port == 2101)
        #expect((try? NTRIPConfiguration.parse(url: "https://x/M").get()) == nil)
        #expect((try? NTRIPConfiguration.parse(url: "ntrip://x:99999/M").get()) == nil)
    }

    @Test func theCorrectionsOptionsAreReadWithTheirPaths() throws {
        guard case .object(let o) = try JSONValue.parse(string: #"{"url": "ntrip://caster:2101/M", "user": "u", "password": "${secret:NTRIP_PASSWORD}", "gga": "sometimes", "backoff": "2s", "version": 3}"#) else { return }
        let d = ConfigurationDiagnostics()
        var options = OptionReader(object: o, path: "sources.gnss.corrections", diagnostics: d, environment: ["NTRIP_PASSWORD": "s3cret"])
        let c = NTRIPConfiguration.read(&options)
        options.finish()
        #expect(c?.password == "s3cret")
        #expect(d.problems.map(\.path) == ["sources.gnss.corrections.version", "sources.gnss.corrections.gga", "sources.gnss.corrections.backoff"])
        #expect(Redaction.redact("password s3cret") != "password s3cret")
    }
}

/// Inputs the NTRIP fuzz target stopped on (Fuzz/README.md).
@Suite struct NTRIPFuzzRegressionTests {
    /// NTRIP `timeout-e0120ad6` (a 5-minute run; `Fuzz/corpus/NTRIP/regression-e0120ad6…`): a
    /// `SOURCETABLE 200` head with a long header line that never ends, sent a byte at a time,
    /// took 3.5 s: each read parsed everything received again. The reader now parses only when
    /// what arrived can end the head; fed byte by byte it finds what one parse finds.
    @Test func aHeadFedAByteAtATimeIsReadAsOneParseReadsIt() throws {
        let heads = [
            "SOURCETABLE 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 289\r" + String(repeating: "x", count: 3000),
            "HTTP/1.1 200 OK\r\nContent-Type: gnss/data\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde",
            "HTTP/1.0 401 Unauthorized\r\n",
            // (ICY with headers sent a byte at a time is data from the status line on, by design:
            // NTRIPResponseHead says why; the headers then reach the RTCM framer as junk.)
            "ICY 200 OK\r\n\u{D3}\u{0}",
            "SOURCETABLE 200 OK\n\nSTR;A\n",
        ]
        for text in heads {
            let bytes = Array(text.utf8)
            var reader = NTRIPResponseHead.Reader()
            var found: (NTRIPResponseHead, Int)?
            for (i, b) in bytes.enumerated() where found == nil {
                found = try reader.feed([b][...], atEnd: i == bytes.count - 1)
            }
            let whole = try NTRIPResponseHead.parse(bytes, atEnd: true)
            #expect(found?.0 == whole?.head && found?.1 == whole?.length, "\(text.prefix(30))")
        }
    }
}
