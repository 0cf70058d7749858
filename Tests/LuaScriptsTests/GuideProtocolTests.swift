import Foundation
import GatewayCore
import GatewayTesting
import LuaRuntime
import Testing
import TrackerProtocols

/// The protocol of Docs/Plugins.md's "a device protocol in 50 lines", taken from the page itself
/// so the guide cannot rot.
@Suite struct GuideProtocolTests {
    static func script() throws -> LuaScript {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("Docs/Plugins.md"), encoding: .utf8)
        let marker = try #require(page.range(of: "<!-- lua: guide-protocol"))
        let open = try #require(page.range(of: "```lua\n", range: marker.upperBound..<page.endIndex))
        let close = try #require(page.range(of: "\n```", range: open.upperBound..<page.endIndex))
        let lines = page[open.upperBound..<close.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 50, "the guide promises 50 lines: \(lines.count)")
        let path = try makeTemporaryDirectory() + "/line.lua"
        try String(page[open.upperBound..<close.lowerBound]).write(toFile: path, atomically: true, encoding: .utf8)
        return try LuaScript(path: path, limits: LuaState.Limits(), required: ["frame", "decode"])
    }

    @Test func theGuidesProtocolLogsInAnswersAfterTheCommitAndRejectsBadLines() throws {
        var codec = LuaCodec(script: try Self.script(), limits: TrackerLimits(maxFrameBytes: 1024), stats: nil)
        var buffer = Array("LOGIN,truck-1\nPOS,20250102030405,46.05,14.5,36,90\nPING\nPOS,garbled\nPOS,2025".utf8)
        var messages: [TrackerDecodeResult] = []
        while true {
            let result = buffer.withUnsafeBytes { codec.decode($0, now: Timestamp(milliseconds: 0)) }
            if case .needMore = result { break }
            messages.append(result)
            switch result {
            case .message(_, let n), .invalid(_, let n, _): buffer.removeFirst(n)
            case .needMore: break
            }
        }
        #expect(messages.count == 4 && buffer == Array("POS,2025".utf8), "the cut line waits")
        guard case .message(.identification("truck-1", let ok, let no), _) = messages[0],
              case .message(.records(let records), _) = messages[1],
              case .message(.control("ping", nil, let pong), _) = messages[2],
              case .invalid(let error, _, false) = messages[3]
        else {
            Issue.record("\(messages)")
            return
        }
        #expect(ok == Array("OK\n".utf8) && no == Array("NO\n".utf8) && pong == Array("PONG\n".utf8))
        #expect(records.answer == Array("ACK\n".utf8) && records.deviceID == nil)
        let p = try #require(records.positions.first)
        #expect(p.time == Timestamp(year: 2025, month: 1, day: 2, hour: 3, minute: 4, second: 5))
        #expect(p.latitude == 46.05 && p.longitude == 14.5 && p.course == 90 && abs((p.speed ?? 0) - 10) < 1e-9)
        #expect(error.reason == "syntax")
    }
}
