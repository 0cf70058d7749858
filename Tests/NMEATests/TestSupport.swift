import Foundation
import GatewayCore
import NMEA

/// Loads fixtures and runs the decoder the ways the tests need.
enum TestSupport {
    static var gpsdDirectory: URL {
        Bundle.module.resourceURL!.appendingPathComponent("Fixtures/gpsd")
    }

    /// Every gpsd log with a `.chk` beside it, sorted by name.
    static var gpsdLogs: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: gpsdDirectory.path)) ?? []
        return names.filter { $0.hasSuffix(".log") }.sorted()
    }

    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: gpsdDirectory.appendingPathComponent(name)))
    }

    /// Decodes `bytes` in the given chunk sizes (cycled), then flushes.
    static func decode(_ bytes: [UInt8], chunks: [Int] = [], options: NMEAOptions = NMEAOptions())
        -> (positions: [Position], statistics: NMEAStatistics)
    {
        var decoder = NMEADecoder(options: options)
        var out: [Position] = []
        bytes.withUnsafeBytes { all in
            if chunks.isEmpty {
                decoder.decode(all, into: &out)
            } else {
                var i = 0
                var k = 0
                while i < all.count {
                    let n = min(max(1, chunks[k % chunks.count]), all.count - i)
                    decoder.decode(UnsafeRawBufferPointer(rebasing: all[i..<(i + n)]), into: &out)
                    i += n
                    k += 1
                }
            }
        }
        decoder.flush(into: &out)
        return (out, decoder.statistics)
    }

    static func decode(_ text: String, chunks: [Int] = [], options: NMEAOptions = NMEAOptions())
        -> (positions: [Position], statistics: NMEAStatistics)
    {
        decode(Array(text.utf8), chunks: chunks, options: options)
    }

    /// `$BODY*HH\r\n` for a body.
    static func line(_ body: String) -> String {
        NMEAChecksum.sentence(body: body)
    }
}

