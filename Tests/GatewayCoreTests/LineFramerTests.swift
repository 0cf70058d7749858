import GatewayCore
import Testing

@Suite struct LineFramerTests {
    func frame(_ text: String, chunk: Int, max: Int = 8) -> (lines: [String], tooLong: Int) {
        var f = LineFramer(maxLineLength: max)
        var out: [String] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let piece = Array(bytes[i..<min(bytes.count, i + chunk)])
            piece.withUnsafeBytes { f.feed($0, line: { out.append(String(decoding: $0, as: UTF8.self)) }) }
            i += chunk
        }
        f.finish { out.append(String(decoding: $0, as: UTF8.self)) }
        return (out, f.tooLong)
    }

    @Test(arguments: [1, 2, 3, 5, 100])
    func anOverlongLineIsSkippedToItsNewlineInAnyChunking(chunk: Int) {
        let r = frame("ab\r\nthis line is too long\ncd\nlast", chunk: chunk)
        #expect(r.lines == ["ab\r", "cd", "last"])
        #expect(r.tooLong == 1)
    }

    @Test func anUnterminatedOverlongTailIsDroppedAtTheEnd() {
        let r = frame("ok\n0123456789abcdef", chunk: 4)
        #expect(r.lines == ["ok"])
        #expect(r.tooLong == 1)
    }
}
