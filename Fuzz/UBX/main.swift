// The UBX messages a receiver stream decodes (NAV-PVT, NAV-STATUS, NAV-SAT, MON-RF, MON-HW,
// ACK-ACK/NAK), each reached with a good checksum: random bytes almost never carry a valid
// Fletcher-8, so this target frames the payload itself and the ReceiverStream target covers
// the framing of hostile streams.
//
// Input: [selector][payload]. The selector picks the message (selector % 7, in the order above);
// the rest is its payload, of any length, framed with UBXFrame.encode.
//
// Checks: the frame checks as one frame, every prefix of it as incomplete (needing more than it
// has and no more than the frame), and a wrong checksum as badChecksum; each message reads
// exactly the payload lengths its layout allows (NAV-PVT ≥ 84, NAV-SAT 8 + 12·n, MON-RF
// 4 + 24·n or 4 + 20·n, MON-HW 60 or 68, ACK 2) and nothing else; through ReceiverStreamDecoder
// the frame is one UBX frame, a NAV-PVT one position (with an id, passing PositionChecks, with
// coordinates only for a fix, a time only when the date and time are valid), an ACK one
// acknowledgement of the message it names.
import FuzzSupport
import GatewayCore
import NMEA
import ReceiverStream
import UBX

let messages: [UBXMessageID] = [.navPVT, .navStatus, .navSat, .monRF, .monHW, .ackAck, .ackNak]

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    guard let selector = input.first else { return 0 }
    let payload = Array(input[1...].prefix(0xFFFF))
    let id = messages[Int(selector) % messages.count]
    let frame = UBXFrame.encode(id, payload: payload)

    frame.withUnsafeBytes { f in
        fuzzCheck(UBXFrame.check(f, maxPayload: 0xFFFF) == .frame(length: f.count), "ubx: an encoded \(id) does not check")
        for cut in [0, 1, 2, 5, 6, f.count / 2, f.count - 1] where cut < f.count {
            let prefix = UnsafeRawBufferPointer(rebasing: f[0..<cut])
            switch UBXFrame.check(prefix, maxPayload: 0xFFFF) {
            case .incomplete(let needed):
                fuzzCheck(needed > cut && needed <= f.count, "ubx: \(cut) bytes of \(f.count) need \(needed)")
            case .notFrame(let reason):
                fuzzCheck(cut == 0 && reason == .noSync, "ubx: \(cut) bytes of a good frame are not a frame (\(reason))")
            case .frame:
                fuzzCheck(false, "ubx: \(cut) bytes of \(f.count) are a whole frame")
            }
        }
        if payload.count > 0 {
            fuzzCheck(UBXFrame.check(f, maxPayload: payload.count - 1) == .notFrame(.tooLong), "ubx: the payload limit is not applied")
        }
    }
    var broken = frame
    broken[broken.count - 1] &+= 1
    broken.withUnsafeBytes { fuzzCheck(UBXFrame.check($0, maxPayload: 0xFFFF) == .notFrame(.badChecksum), "ubx: a wrong checksum passes") }

    let n = payload.count
    let parsed: Bool = payload.withUnsafeBytes { p in
        switch id {
        case .navPVT: return NavPVT(payload: p) != nil
        case .navStatus: return NavStatus(payload: p) != nil
        case .navSat:
            guard let sat = NavSat(payload: p) else { return false }
            let summary = sat.summary
            fuzzCheck(summary.used <= sat.satellites.count && summary.seen <= sat.satellites.count, "ubx: NAV-SAT summary \(summary)")
            return true
        case .monRF:
            guard let rf = MonRF(payload: p) else { return false }
            let width = rf.layout == .standard24 ? 24 : 20
            fuzzCheck(n == 4 + width * rf.blocks.count && !rf.blocks.isEmpty, "ubx: MON-RF \(rf.layout) with \(rf.blocks.count) blocks in \(n) bytes")
            fuzzCheck(rf.blocks.allSatisfy { ($0.jammingState == nil) == (rf.layout == .compact20) }, "ubx: MON-RF jamming state and layout disagree")
            return true
        case .monHW: return MonHW(payload: p) != nil
        default: return UBXAcknowledgement(id: id, payload: p) != nil
        }
    }
    let expected: Bool
    switch id {
    case .navPVT: expected = n >= 84
    case .navStatus: expected = n >= 16
    case .navSat: expected = n >= 8 && n == 8 + 12 * Int(payload[5])
    case .monRF: expected = n >= 4 && payload[1] > 0 && (n == 4 + 24 * Int(payload[1]) || n == 4 + 20 * Int(payload[1]))
    case .monHW: expected = n == 60 || n == 68
    default: expected = n == 2
    }
    fuzzCheck(parsed == expected, "ubx: \(id) of \(n) bytes read: \(parsed), layout allows: \(expected)")

    var options = NMEAOptions()
    options.source = "fuzz"
    options.device = "receiver"
    options.idPrefix = "fuzz-"
    var decoder = ReceiverStreamDecoder(options: options, maxUBXPayload: 0xFFFF)
    var positions: [Position] = []
    frame.withUnsafeBytes { decoder.decode($0, into: &positions) }
    decoder.flush(into: &positions)
    let s = decoder.statistics
    fuzzCheck(s.ubxFrames == 1 && s.ubxBadChecksum == 0 && s.bytes == frame.count, "ubx: one frame decoded as \(s)")
    fuzzCheck(positions.count == (id == .navPVT && parsed ? 1 : 0), "ubx: \(positions.count) positions from one \(id)")
    PositionChecks.check(positions, "ubx")
    if let p = positions.first, let pvt = payload.withUnsafeBytes({ NavPVT(payload: $0) }) {
        fuzzCheck(!p.id.isEmpty, "ubx: a position without an id")
        fuzzCheck(p.hasCoordinates == (p.mode != .noFix), "ubx: mode \(p.mode) with coordinates: \(p.hasCoordinates)")
        fuzzCheck(p.time == nil || (pvt.validDate && pvt.validTime), "ubx: a time from an invalid date or time")
        fuzzCheck(!p.hasCoordinates || (!pvt.invalidLlh && (pvt.gnssFixOK || pvt.fixType == 5)), "ubx: coordinates from an invalid fix")
    }
    let acks = decoder.takeAcknowledgements()
    if (id == .ackAck || id == .ackNak) && parsed {
        fuzzCheck(acks == [UBXAcknowledgement(message: UBXMessageID(payload[0], payload[1]), accepted: id == .ackAck)], "ubx: \(id) gave \(acks)")
    } else {
        fuzzCheck(acks.isEmpty, "ubx: an acknowledgement from \(id)")
    }
    _ = decoder.takeAntennaReports()
    _ = decoder.takeReceiverReports()
    return 0
}

FuzzDriver.run(testOneInput)
