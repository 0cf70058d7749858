import GatewayCore

// Commands to the Teltonika, GT06 and H02 trackers, and their answers. The bytes are those of
// Traccar's encoder tests (`*-commands.txt` beside the decoder vectors); each protocol's table
// says which types it carries.

/// Teltonika: a Codec 12 command (type 05) on the device's connection; it answers with a Codec 12
/// response (type 06) whose text is the result.
///
/// | type | command text |
/// |---|---|
/// | `custom` | `data` as ASCII, or `hex` as bytes |
/// | `engine_stop` / `engine_resume` | `setdigout 1` / `setdigout 0` (DOUT1 drives the relay) |
/// | `position_now` | `getgps` |
/// | `reboot` | `cpureset` |
extension TeltonikaCodec {
    public var commandTypes: Set<CommandType> { transport == .tcp ? [.custom, .engineStop, .engineResume, .positionNow, .reboot] : [] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        let content: [UInt8]
        switch command.type {
        case .custom:
            if let hex = command.parameters["hex"] {
                guard let bytes = WireText.bytes(hex: hex) else { return nil }
                content = bytes
            } else {
                content = Array((command.parameters["data"] ?? "").utf8)
            }
        case .engineStop: content = Array("setdigout 1".utf8)
        case .engineResume: content = Array("setdigout 0".utf8)
        case .positionNow: content = Array("getgps".utf8)
        case .reboot: content = Array("cpureset".utf8)
        case .setInterval, .text: return nil
        }
        var data: [UInt8] = [0x0C, 0x01, 0x05]
        data += Self.word32(UInt32(content.count)) + content + [0x01]
        return [0, 0, 0, 0] + Self.word32(UInt32(data.count)) + data + Self.word32(UInt32(CRC16.arc(data)))
    }

    /// A Codec 12 response answers the one command in flight: its text is the result.
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        .done(reply.text ?? "")
    }

    static func word32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}

/// GT06: an online command (protocol 0x80) with a server flag (the command's number on the
/// connection) and the text; the device answers with 0x15 (or 0x21 in a `79 79` frame) echoing
/// the flag, and its text is the result.
///
/// | type | text |
/// |---|---|
/// | `custom` | `data` |
/// | `engine_stop` / `engine_resume` | `Relay,1#` / `Relay,0#` |
/// | `position_now` | `WHERE#` |
/// | `reboot` | `RESET#` |
extension GT06Codec {
    public var commandTypes: Set<CommandType> { [.custom, .engineStop, .engineResume, .positionNow, .reboot] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        let text: String
        switch command.type {
        case .custom:
            guard let data = command.parameters["data"] else { return nil }
            text = data
        case .engineStop: text = "Relay,1#"
        case .engineResume: text = "Relay,0#"
        case .positionNow: text = "WHERE#"
        case .reboot: text = "RESET#"
        case .setInterval, .text: return nil
        }
        let bytes = Array(text.utf8)
        // Content: length of what follows (server flag and text), the server flag, the text.
        // The device echoes the flag in its answer: the command's number on this connection
        // (0 first, as Traccar sends every time), so a late answer to one command is never
        // taken for the next one's.
        guard bytes.count + 4 <= 0xF0 else { return nil }
        let flag = UInt32(commandSerial)
        let content = [UInt8(bytes.count + 4), UInt8(flag >> 24), UInt8(flag >> 16 & 0xFF), UInt8(flag >> 8 & 0xFF), UInt8(flag & 0xFF)] + bytes
        defer { commandSerial &+= 1 }
        return Self.frame(0x80, content: content, serial: commandSerial)
    }

    /// The reply's server flag is the command's (the 4 bytes after its content length).
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        guard sent.count > 9, reply.reference == Array(sent[5..<9]) else { return nil }
        return .done(reply.text ?? "")
    }
}

/// H02: `*HQ,<id>,<command>,<HHMMSS>,<parameters>#` (the server's UTC time); the device answers with
/// a `V4` sentence naming the command (`*HQ,<id>,V4,S20,DONE,…`): `ERROR` fails it.
///
/// | type | sentence |
/// |---|---|
/// | `engine_stop` / `engine_resume` | `S20,<time>,1,1` / `S20,<time>,1,0` |
/// | `set_interval` | `S71,<time>,22,<seconds>` |
/// | `custom` | `*HQ,<id>,<data>#` |
extension H02Codec {
    public var commandTypes: Set<CommandType> { [.custom, .engineStop, .engineResume, .setInterval] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let id = lastDeviceID else { return nil }
        let time = Self.timeOnly(now)
        let body: String
        switch command.type {
        case .engineStop: body = "S20,\(time),1,1"
        case .engineResume: body = "S20,\(time),1,0"
        case .setInterval:
            guard let seconds = CommandRequest.intervalSeconds(command.parameters) else { return nil }
            body = "S71,\(time),22,\(seconds)"
        case .custom:
            guard let data = command.parameters["data"] else { return nil }
            body = data
        case .positionNow, .reboot, .text: return nil
        }
        return Self.answer(id: id, body)
    }

    /// A V4 reply names the command it answers; `ERROR` among its results fails it.
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        let fields = String(decoding: sent, as: UTF8.self).dropFirst().dropLast().split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count > 2, Array(fields[2].utf8) == reply.reference else { return nil }
        let text = reply.text ?? ""
        return text.split(separator: ",").contains("ERROR") ? .failed(text) : .done(text)
    }

    /// The command word and result fields of a V4 sentence (fields 3 up to `end`, the command time excluded).
    static func reply(_ fields: [Substring], end: Int) -> TrackerCommandReply {
        let command = fields.count > 3 ? Array(fields[3].utf8) : []
        let results = fields.count > 4 && end > 4 ? fields[4..<min(end, fields.count)].joined(separator: ",") : ""
        return TrackerCommandReply(reference: command, text: results)
    }
}
