import GatewayTesting
import Testing
@testable import NMEA

/// The address field that decides what a body is, against the plain rule: `P…` is proprietary;
/// five capital letters or digits then a comma are a standard address, parsed when the last
/// three name a known sentence; anything else is unknown. Over seeded addresses of every
/// length from bytes that sit next to the allowed ranges (`/ : @ [`, lowercase, space).
@Suite struct AddressTests {
    enum Kind: Equatable { case parsed, proprietary, unknown }

    static func reference(_ address: [UInt8]) -> Kind {
        guard let first = address.first else { return .unknown }
        if first == UInt8(ascii: "P") { return .proprietary }
        let standard = address.count == 5 && address.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) }
        let known: Set<String> = ["RMC", "GGA", "GNS", "GLL", "GSA", "GSV", "VTG", "ZDA", "GST", "HDT", "THS"]
        return standard && known.contains(String(decoding: address.suffix(3), as: UTF8.self)) ? .parsed : .unknown
    }

    static func kind(_ body: [UInt8]) -> Kind {
        var memos = FieldReader.Memos()
        return body.withUnsafeBytes { raw in
            switch SentenceParser.parse(body: raw, memos: &memos) {
            case .sentence, .badField: .parsed
            case .proprietary: .proprietary
            case .unknown: .unknown
            }
        }
    }

    @Test func everyAddressIsClassifiedByTheRule() {
        let alphabet = Array("ABGLNPRSTVXZ0123456789AGMCSV/:@[`az ".utf8)
        var random = SeededGenerator(seed: 5)
        var mismatches: [String] = []
        var seen: [Kind: Int] = [:]
        for i in 0..<20_000 {
            func randomBytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in alphabet.randomElement(using: &random)! } }
            let formatter = Array(["RMC", "GGA", "GSA", "GSV", "VTG", "ZZZ"].randomElement(using: &random)!.utf8)
            var address: [UInt8]
            switch i % 4 {
            case 0: address = randomBytes(Int.random(in: 0...7, using: &random))
            case 1: address = randomBytes(2) + formatter  // any talker before a known formatter
            case 2:  // a good address with one byte changed
                address = Array("GP".utf8) + formatter
                address[Int.random(in: 0..<5, using: &random)] = alphabet.randomElement(using: &random)!
            default: address = Array("P".utf8) + randomBytes(Int.random(in: 0...5, using: &random))
            }
            // Short bodies take the byte-by-byte path, long ones the one-word check.
            let fields = i % 2 == 0 ? ",1,2" : ",,,,,,,,,,,,,,,,"
            let body = address + Array(fields.utf8)
            let expected = Self.reference(address)
            let got = Self.kind(body)
            seen[expected, default: 0] += 1
            if got != expected && mismatches.count < 5 { mismatches.append("\(String(decoding: body, as: UTF8.self)): \(got), expected \(expected)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
        #expect(seen.count == 3 && seen.values.allSatisfy { $0 > 1000 }, "\(seen)")
    }
}
