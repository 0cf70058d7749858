import GatewayCore
#if canImport(Glibc)
import Glibc
#endif

/// Commands to JT/T 808 terminals, and their answers (`jt808-commands.txt` has the bytes).
///
/// | type | message | body |
/// |---|---|---|
/// | `set_interval` | 0x8103 set parameters | 1 parameter: 0x0029 (default reporting interval), 4 bytes, seconds |
/// | `position_now` | 0x8201 position query | empty; answered by 0x0201 with the position |
/// | `reboot` | 0x8105 terminal control | command word 0x04 (reset) |
/// | `engine_stop` / `engine_resume` | 0x8105 terminal control | 0xF0 / 0xF1 (Traccar's words; the standard has none) |
/// | `text` | 0x8300 text message | flag (`flags`, default 0x0C: shown and read out), [2019: type 0x01, notice], the text (GBK for non-ASCII) |
/// | `custom` | `data`: 0x8900 transparent, type 0xF0, the text; `hex`: the bytes as given (a whole frame) |
///
/// A command goes in the terminal's own header form (its phone field, 2013 or 2019) and gets the
/// next server serial as it goes out. The terminal answers with 0x0001 (the command's serial and
/// id, a result: 0 success → `done`, 1 failure, 2 message error, 3 not supported → `failed`), or
/// a position query with 0x0201 (→ `done`, and the position).
extension JT808Codec {
    public var commandTypes: Set<CommandType> { Set(CommandType.allCases) }

    /// 0x8300's flag when `flags` is not given: terminal display and TTS read-out.
    static let textFlags: UInt8 = 0x0C

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let header = lastHeader else { return nil }
        switch command.type {
        case .setInterval:
            guard let seconds = CommandRequest.intervalSeconds(command.parameters) else { return nil }
            var body: [UInt8] = [1]
            JT808Wire.append(UInt32(0x0029), to: &body)
            body.append(4)
            JT808Wire.append(UInt32(clamping: seconds), to: &body)
            return message(0x8103, body, header)
        case .positionNow:
            return message(0x8201, [], header)
        case .reboot:
            return message(0x8105, [0x04], header)
        case .engineStop:
            return message(0x8105, [0xF0], header)
        case .engineResume:
            return message(0x8105, [0xF1], header)
        case .text:
            guard let text = command.parameters["text"], let encoded = GBK.encode(text) else { return nil }
            // The flag: bit 0 emergency, bit 2 terminal display, bit 3 TTS read-out. A text for
            // the driver is shown and read out, not an emergency, unless `flags` says otherwise.
            let flags = command.parameters["flags"] == nil ? Self.textFlags : CommandRequest.textFlags(command.parameters)
            guard let flags else { return nil }
            return message(0x8300, (header.is2019 ? [flags, 0x01] : [flags]) + encoded, header)
        case .custom:
            if let hex = command.parameters["hex"] { return WireText.bytes(hex: hex) }
            guard let data = command.parameters["data"], let encoded = GBK.encode(data) else { return nil }
            return message(0x8900, [0xF0] + encoded, header)
        }
    }

    /// A server message in the terminal's header form (numbered by ``outgoing(_:)``).
    private func message(_ id: UInt16, _ body: [UInt8], _ header: JT808Wire.Header) -> [UInt8]? {
        guard body.count <= 0x03FF else { return nil }
        return header.answerHeader(messageID: id, bodyLength: body.count) + body
    }

    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        guard case .frame(let unescaped, _) = sent.withUnsafeBytes({ JT808Wire.scan($0, maxFrameBytes: Int.max) }),
              let header = unescaped.withUnsafeBytes({ JT808Wire.Header.parse($0) }) else { return nil }
        var sentReference: [UInt8] = []
        JT808Wire.append(header.serial, to: &sentReference)
        JT808Wire.append(header.messageID, to: &sentReference)
        guard reply.reference == sentReference else { return nil }
        switch reply.code {
        case nil: return .done(reply.text ?? "answered")
        case 0?: return .done("success")
        case 4?: return .done("alarm confirmed")
        case 1?: return .failed("failure")
        case 2?: return .failed("message error")
        case 3?: return .failed("not supported")
        case let other?: return .failed("result \(other)")
        }
    }
}

/// Text for Chinese terminals: GBK, the encoding JT/T 808 strings use. ASCII is GBK as it is;
/// other characters go through the C library's iconv (glibc has GBK), since Foundation on Linux
/// has no GBK encoder.
enum GBK {
    static func encode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        if utf8.allSatisfy({ $0 < 0x80 }) { return utf8 }
        let converter = iconv_open("GBK", "UTF-8")
        guard converter != iconv_t(bitPattern: -1) else { return nil }
        defer { iconv_close(converter) }
        var input = utf8.map { CChar(bitPattern: $0) }
        var output = [CChar](repeating: 0, count: utf8.count * 2 + 4)
        let written: Int? = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                var inPointer: UnsafeMutablePointer<CChar>? = inBuffer.baseAddress
                var inLeft = inBuffer.count
                var outPointer: UnsafeMutablePointer<CChar>? = outBuffer.baseAddress
                var outLeft = outBuffer.count
                guard iconv(converter, &inPointer, &inLeft, &outPointer, &outLeft) != -1, inLeft == 0 else { return nil }
                return outBuffer.count - outLeft
            }
        }
        guard let written else { return nil }
        return output.prefix(written).map { UInt8(bitPattern: $0) }
    }
}
