/// The head of a caster's answer, read as bytes arrive: its status line, headers and what it means.
///
/// NTRIP 1 casters answer `ICY 200 OK` and start the data at once — RTKLIB's `str2str` sends no
/// blank line and no header after it — or, for some, a few headers and a blank line first; a
/// missing mountpoint gives `SOURCETABLE 200 OK` and the table. NTRIP 2 casters answer HTTP/1.1
/// (`200 OK` with `Content-Type: gnss/data`, often chunked; a missing mountpoint: 404, or 200 with
/// `gnss/sourcetable`). Either answer may come to either request, so both are understood.
public struct NTRIPResponseHead: Sendable, Equatable {
    /// What the answer is.
    public enum Kind: Sendable, Equatable {
        /// Corrections follow (`ICY 200 OK`, or HTTP 200 with data).
        case data
        /// The sourcetable follows (`SOURCETABLE 200 OK`, or HTTP 200 `gnss/sourcetable`).
        case sourcetable
        /// 401: the user or password is wrong (or missing).
        case unauthorized
        /// Any other status: 404 mountpoint not found, 403 banned, 503 caster full…
        case refused(Int, String)
    }

    public var kind: Kind
    /// The status line as sent.
    public var statusLine: String
    /// Header names lowercased; the last of a repeated name wins.
    public var headers: [String: String]
    /// The body is HTTP chunked.
    public var chunked: Bool { headers["transfer-encoding"]?.lowercased().contains("chunked") == true }
    /// `Content-Length`, when given.
    public var contentLength: Int? { headers["content-length"].flatMap { Int($0.trimmingSpaces()) } }

    /// How far a head may reach before the answer is not a caster's.
    public static let maximumLength = 16 * 1024

    public enum Failure: Error, Equatable, Sendable {
        /// The first line is not a status line NTRIP or HTTP knows.
        case notNTRIP(String)
        case tooLong
    }

    /// Reads a head from the start of `bytes`: nil while more bytes are needed, else the head and
    /// how many bytes it took (what follows is body). `atEnd`: the caster closed the connection,
    /// so a head without its blank line is complete (str2str's `HTTP/1.0 401 Unauthorized\r\n`).
    public static func parse(_ bytes: [UInt8], atEnd: Bool = false) throws(Failure) -> (head: NTRIPResponseHead, length: Int)? {
        guard let firstEnd = bytes.firstIndex(of: 0x0A) else {
            if bytes.count > maximumLength { throw .tooLong }
            // A first line that cannot become a status line fails at once, not after 16 KB.
            let start = String(decoding: bytes.prefix(12), as: UTF8.self)
            if !bytes.isEmpty && !["ICY ", "HTTP/", "SOURCETABLE "].contains(where: { $0.hasPrefix(start) || start.hasPrefix($0) }) {
                throw .notNTRIP(start)
            }
            return nil
        }
        let status = text(bytes[..<firstEnd])
        let parts = status.split(separator: " ", maxSplits: 2).map(String.init)
        if status.hasPrefix("ICY ") {
            guard parts.count >= 2, parts[1] == "200" else { throw .notNTRIP(status) }
            // Headers only if a header-like line or a blank line came with the status line; else
            // the data starts here. A caster that sends nothing more until it has data (str2str)
            // must not be waited on: headers that come later are text, which the RTCM framer
            // drops as junk (no header byte is 0xD3).
            let afterStatus = firstEnd + 1
            if afterStatus < bytes.count && (bytes[afterStatus] == 0x0D || bytes[afterStatus] == 0x0A || looksLikeHeader(bytes[afterStatus...])),
               let (headers, end) = try headerBlock(bytes, from: afterStatus, atEnd: true) {
                return (NTRIPResponseHead(kind: .data, statusLine: status, headers: headers), end)
            }
            return (NTRIPResponseHead(kind: .data, statusLine: status, headers: [:]), afterStatus)
        }
        if status.hasPrefix("SOURCETABLE ") {
            guard let (headers, end) = try headerBlock(bytes, from: firstEnd + 1, atEnd: atEnd) else { return nil }
            return (NTRIPResponseHead(kind: .sourcetable, statusLine: status, headers: headers), end)
        }
        guard status.hasPrefix("HTTP/"), parts.count >= 2, let code = Int(parts[1]) else { throw .notNTRIP(status) }
        guard let (headers, end) = try headerBlock(bytes, from: firstEnd + 1, atEnd: atEnd) else { return nil }
        let kind: Kind
        switch code {
        case 200:
            kind = headers["content-type"]?.lowercased().contains("sourcetable") == true ? .sourcetable : .data
        case 401: kind = .unauthorized
        default: kind = .refused(code, parts.count > 2 ? parts[2] : "")
        }
        return (NTRIPResponseHead(kind: kind, statusLine: status, headers: headers), end)
    }

    /// Reads a head as the bytes of a connection arrive, in time linear in the head: ``parse(_:atEnd:)``
    /// runs again only when what arrived can complete it (the status line's end, a blank line,
    /// the end of the connection). Re-parsing everything on every read cost a caster that
    /// sends its head a byte at a time quadratic time (3.5 s for 2.4 KB; found by Fuzz/NTRIP).
    public struct Reader: Sendable {
        /// Everything received so far.
        public private(set) var received: [UInt8] = []
        private var firstLineEnd: Int?
        private var searchFrom = 0

        public init() {}

        /// Adds `bytes`; the head and where the body starts in ``received`` once complete.
        public mutating func feed(_ bytes: ArraySlice<UInt8>, atEnd: Bool = false) throws(Failure) -> (head: NTRIPResponseHead, length: Int)? {
            let old = received.count
            received += bytes
            if firstLineEnd == nil {
                guard let nl = received[old...].firstIndex(of: 0x0A) else {
                    // Until the first line ends: early rejection of what cannot be a status line.
                    if old < 16 || atEnd || received.count > maximumLength { return try parse(received, atEnd: atEnd) }
                    return nil
                }
                firstLineEnd = nl
                searchFrom = nl
                if let r = try parse(received, atEnd: atEnd) { return r }
            }
            // Otherwise the head ends at a blank line (LF LF or LF CR LF) or at the end of the connection.
            let from = max(searchFrom, old - 2)
            var i = from
            var blank = false
            while i + 1 < received.count {
                if received[i] == 0x0A && (received[i + 1] == 0x0A || (received[i + 1] == 0x0D && i + 2 < received.count && received[i + 2] == 0x0A)) {
                    blank = true
                    break
                }
                i += 1
            }
            searchFrom = max(searchFrom, received.count - 2)
            if blank || atEnd || received.count > maximumLength { return try parse(received, atEnd: atEnd) }
            return nil
        }
    }

    /// Header lines from `start` to the blank line: nil while it has not arrived (at the end of
    /// the input: the lines there are).
    static func headerBlock(_ bytes: [UInt8], from start: Int, atEnd: Bool) throws(Failure) -> ([String: String], Int)? {
        var headers: [String: String] = [:]
        var i = start
        while true {
            guard i < bytes.count, let end = bytes[i...].firstIndex(of: 0x0A) else {
                if bytes.count > maximumLength { throw .tooLong }
                return atEnd ? (headers, i) : nil
            }
            let line = text(bytes[i..<end])
            i = end + 1
            if line.isEmpty { return (headers, i) }
            if let colon = line.firstIndex(of: ":") {
                headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingSpaces()
            }
            if i > maximumLength { throw .tooLong }
        }
    }

    /// `Name: value` in printable ASCII up to the line end (a binary RTCM frame starts with 0xD3).
    static func looksLikeHeader(_ bytes: ArraySlice<UInt8>) -> Bool {
        var sawColon = false
        for b in bytes.prefix(200) {
            if b == 0x0A || b == 0x0D { return sawColon }
            if b == UInt8(ascii: ":") { sawColon = true }
            if b < 0x20 || b > 0x7E { return false }
        }
        return false
    }

    static func text(_ bytes: ArraySlice<UInt8>) -> String {
        let trimmed = bytes.last == 0x0D ? bytes.dropLast() : bytes
        return String(decoding: trimmed, as: UTF8.self)
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return String(s)
    }
}
