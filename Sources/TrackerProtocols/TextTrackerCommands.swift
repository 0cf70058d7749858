import GatewayCore

// Commands to the text-protocol trackers (GPS103, watches, @Track, Meitrack, Suntech), and their
// answers. The bytes are those of `*-commands.txt` (Traccar's encoder tests, and cases derived
// from its encoders); each protocol's table says which types it carries. Commands go in the
// form of the device's own frames (its id, maker, header), so a codec encodes one only once the
// device has sent a frame.

/// GPS103: `**,imei:<IMEI>,<code>[,<parameter>]` in ASCII, no terminator. The device has no
/// answer of its own (it acts, or sends a report): a command is `delivered` once written.
///
/// | type | code |
/// |---|---|
/// | `position_now` | `B` |
/// | `set_interval` | `C,<interval>`: `30s`, `05m`, `01h` (the largest unit that divides it; Traccar rounds down to it) |
/// | `engine_stop` / `engine_resume` | `J` / `K` |
/// | `custom` | `data` as given (`H,080`) |
extension GPS103Codec {
    public var commandTypes: Set<CommandType> { [.custom, .positionNow, .setInterval, .engineStop, .engineResume] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let imei = lastDeviceID else { return nil }
        let code: String
        switch command.type {
        case .positionNow: code = "B"
        case .setInterval:
            guard let seconds = CommandRequest.intervalSeconds(command.parameters), seconds > 0 else { return nil }
            code = "C," + Self.interval(seconds)
        case .engineStop: code = "J"
        case .engineResume: code = "K"
        case .custom:
            guard let data = command.parameters["data"], !data.isEmpty else { return nil }
            code = data
        case .reboot, .text: return nil
        }
        return TextFraming.ascii("**,imei:\(imei),\(code)")
    }

    public func awaitsReply(to command: DeviceCommand) -> Bool { false }

    /// `05m`: the largest of hours, minutes and seconds that divides `seconds`, two digits at least.
    static func interval(_ seconds: Int) -> String {
        let (value, unit) = seconds % 3600 == 0 ? (seconds / 3600, "h") : seconds % 60 == 0 ? (seconds / 60, "m") : (seconds, "s")
        return (value < 10 ? "0" : "") + "\(value)\(unit)"
    }
}

/// Watches: `[<maker>*<id>*[0001*]<length>*<content>]`, the maker, id and index form of the
/// device's own frames, the length in four lowercase hex digits. The device echoes the command's
/// word (`[3G*<id>*0002*CR]`): that echo is the command's `done`.
///
/// | type | content |
/// |---|---|
/// | `position_now` | `CR` |
/// | `set_interval` | `UPLOAD,<seconds>` |
/// | `reboot` | `RESET` |
/// | `text` | `MESSAGE,<the text in UTF-16BE, hex>` |
/// | `custom` | `data` as given (`SOS1,123456789`, `LZ,0,+8`); no `[` or `]` |
extension WatchCodec {
    public var commandTypes: Set<CommandType> { [.custom, .positionNow, .setInterval, .reboot, .text] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let header = lastHeader else { return nil }
        let content: String
        switch command.type {
        case .positionNow: content = "CR"
        case .setInterval:
            guard let seconds = CommandRequest.intervalSeconds(command.parameters) else { return nil }
            content = "UPLOAD,\(seconds)"
        case .reboot: content = "RESET"
        case .text:
            guard let text = command.parameters["text"] else { return nil }
            content = "MESSAGE," + text.utf16.map { WireText.hex([UInt8($0 >> 8), UInt8($0 & 0xFF)]) }.joined()
        case .custom:
            guard let data = command.parameters["data"], !data.isEmpty, !data.contains("["), !data.contains("]") else { return nil }
            content = data
        case .engineStop, .engineResume: return nil
        }
        let bytes = Array(content.utf8)
        guard bytes.count <= 0xFFFF else { return nil }
        let length = WireText.hex([UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)])
        sentWords.append(Self.word(content))
        if sentWords.count > 8 { sentWords.removeFirst() }
        return TextFraming.ascii("[\(header.maker)*\(header.id)*\(header.indexed ? "0001*" : "")\(length)*") + bytes + [Self.close]
    }

    /// The echo of the command's word.
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        guard sent.count > 2, let content = sent.dropFirst().dropLast().withUnsafeBytes({ Self.content(of: $0) }),
              Array(Self.word(content).utf8) == reply.reference else { return nil }
        return .done(reply.text ?? content)
    }

    /// A command's word: its content up to the first comma.
    static func word(_ content: String) -> String {
        String(content.prefix { $0 != "," })
    }

    /// The content of a frame between its brackets, after its header.
    static func content(of frame: UnsafeRawBufferPointer) -> String? {
        let header = TextFields(frame, separator: star, limit: 5)
        guard header.count >= 4 else { return nil }
        let indexed = header.count == 5 && isFourHex(header[2]) && isFourHex(header[3])
        return String(decoding: frame[header.ranges[indexed ? 4 : 3].lowerBound...], as: UTF8.self)
    }
}

/// Queclink @Track: `AT+GT<command>=<password>,<parameters>,<serial number>$`. The serial number
/// is FFFF for a connection's first command (what Traccar always sends), then counts down, so a
/// late acknowledgement is never taken for the next command's. The device acknowledges with
/// `+ACK:GT<command>,…,<serial number>,<send time>,<count>$`: `done`.
///
/// | type | command |
/// |---|---|
/// | `position_now` | `AT+GTRTO=<pw>,1,,,,,,<serial>$` (the position follows as `+RESP:GTRTL`) |
/// | `reboot` | `AT+GTRTO=<pw>,3,,,,,,<serial>$` |
/// | `engine_stop` / `engine_resume` | `AT+GTOUT=<pw>,1,,,0,0,0,0,0,0,0,,,,,,,<serial>$` / `…=<pw>,0,…` (output 1) |
/// | `custom` | `data` as given, a whole `AT+GT…$` command (its serial number, if it has one, matches the `+ACK`) |
extension GL200Codec {
    public var commandTypes: Set<CommandType> { [.custom, .positionNow, .reboot, .engineStop, .engineResume] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        let serial = WireText.hex([UInt8(commandSerial >> 8), UInt8(commandSerial & 0xFF)]).uppercased()
        let text: String
        switch command.type {
        case .positionNow: text = "AT+GTRTO=\(password),1,,,,,,\(serial)$"
        case .reboot: text = "AT+GTRTO=\(password),3,,,,,,\(serial)$"
        case .engineStop: text = "AT+GTOUT=\(password),1,,,0,0,0,0,0,0,0,,,,,,,\(serial)$"
        case .engineResume: text = "AT+GTOUT=\(password),0,,,0,0,0,0,0,0,0,,,,,,,\(serial)$"
        case .custom:
            guard let data = command.parameters["data"], !data.isEmpty else { return nil }
            return TextFraming.ascii(data)
        case .setInterval, .text: return nil
        }
        commandSerial = commandSerial == 0 ? 0xFFFF : commandSerial - 1
        return TextFraming.ascii(text)
    }

    /// An `+ACK` naming the command and its serial number.
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        guard let reference = Self.reference(of: String(decoding: sent, as: UTF8.self)), Array(reference.utf8) == reply.reference else {
            return nil
        }
        let detail = reply.text ?? ""
        return .done(detail.isEmpty ? "acknowledged" : "acknowledged: \(detail)")
    }

    /// `RTO,FFFF` of `AT+GTRTO=…,FFFF$`: what the `+ACK` repeats.
    static func reference(of command: String) -> String? {
        guard command.hasPrefix("AT+GT"), let equals = command.firstIndex(of: "=") else { return nil }
        let name = command[command.index(command.startIndex, offsetBy: 5)..<equals]
        let serial = command.drop { $0 != "=" }.split(separator: ",", omittingEmptySubsequences: false).last?.prefix { $0 != "$" } ?? ""
        return "\(name),\(serial)"
    }
}

/// Meitrack: `@@<identifier><length>,<IMEI>,<command>*<checksum>\r\n`, the frame of the
/// device's `$$` frames. The identifier is `A` for a connection's first command (what Traccar
/// always sends), then the next letter up to `z`: the device answers with the same identifier
/// and the command's word (`$$A28,<IMEI>,C01,OK*…`), its text the result (`done`); a position
/// query is answered by an `AAA` report with its identifier.
///
/// | type | command |
/// |---|---|
/// | `position_now` | `A10` |
/// | `engine_stop` / `engine_resume` | `C01,0,12222` / `C01,0,02222` (output 1) |
/// | `custom` | `data` as given (`A11,6`) |
extension MeitrackCodec {
    public var commandTypes: Set<CommandType> { [.custom, .positionNow, .engineStop, .engineResume] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let imei = lastDeviceID else { return nil }
        let text: String
        switch command.type {
        case .positionNow: text = "A10"
        case .engineStop: text = "C01,0,12222"
        case .engineResume: text = "C01,0,02222"
        case .custom:
            guard let data = command.parameters["data"], !data.isEmpty, !data.contains("*") else { return nil }
            text = data
        case .setInterval, .reboot, .text: return nil
        }
        let flag = commandFlag
        commandFlag = commandFlag >= UInt8(ascii: "z") ? UInt8(ascii: "A") : commandFlag + 1
        if command.type == .positionNow { positionQueryFlag = flag }
        return Self.command(flag: flag, imei: imei, text)
    }

    /// An answer with the command's identifier and word.
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        guard sent.count > 3, let word = Self.word(of: sent), [sent[2]] + Array(word.utf8) == reply.reference else { return nil }
        let text = reply.text ?? ""
        return .done(text.isEmpty ? "answered" : text)
    }

    /// The command word of a command frame (`A10` of `@@A25,<IMEI>,A10*58\r\n`).
    static func word(of frame: [UInt8]) -> String? {
        let parts = frame.split(separator: comma, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return String(decoding: parts[2].prefix { $0 != comma && $0 != star }, as: UTF8.self)
    }
}

/// Suntech: one line ending with `\r`, in the form of the device's last report. Legacy devices
/// (`ST300STT;…` reports): `<model>CMD;<id>;02;<action>` (`SA200` before any report names the
/// model), answered `<model>CMD;Res;<id>;<version>;<action>;…`; universal devices (3-letter
/// headers, binary reports): `CMD;<id>;<group>;<action>`, answered `RES;<id>;<group>;<action>;…`.
/// The answer naming the command is its `done`, with the fields after the action as its text.
///
/// | type | legacy action | universal group;action |
/// |---|---|---|
/// | `reboot` | `Reboot` | `03;03` |
/// | `position_now` | `StatusReq` | `03;01` |
/// | `engine_stop` / `engine_resume` | `Enable1` / `Disable1` | `04;01` / `04;02` (output 1) |
/// | `custom` | `data` as given, a whole command without its `\r` | |
extension SuntechCodec {
    public var commandTypes: Set<CommandType> { [.custom, .positionNow, .reboot, .engineStop, .engineResume] }

    public mutating func encode(_ command: DeviceCommand, now: Timestamp) -> [UInt8]? {
        guard let id = lastDeviceID else { return nil }
        let text: String
        if case .custom = command.type {
            guard let data = command.parameters["data"], !data.isEmpty, !data.contains("\r") else { return nil }
            text = data
        } else if universal {
            switch command.type {
            case .reboot: text = "CMD;\(id);03;03"
            case .positionNow: text = "CMD;\(id);03;01"
            case .engineStop: text = "CMD;\(id);04;01"
            case .engineResume: text = "CMD;\(id);04;02"
            default: return nil
            }
        } else {
            // The model: the last report's header less its type (ST300STT → ST300).
            let model = legacyHeader.flatMap { $0.utf8.count > 5 ? String($0.dropLast(3)) : nil } ?? "SA200"
            switch command.type {
            case .reboot: text = "\(model)CMD;\(id);02;Reboot"
            case .positionNow: text = "\(model)CMD;\(id);02;StatusReq"
            case .engineStop: text = "\(model)CMD;\(id);02;Enable1"
            case .engineResume: text = "\(model)CMD;\(id);02;Disable1"
            default: return nil
            }
        }
        return TextFraming.ascii(text + "\r")
    }

    /// A `Res`/`RES` answer naming the command's action.
    public func outcome(of reply: TrackerCommandReply, sent: [UInt8]) -> CommandOutcome? {
        let fields = String(decoding: sent, as: UTF8.self).split(separator: "\r").first?
            .split(separator: ";", omittingEmptySubsequences: false) ?? []
        guard fields.count >= 4 else { return nil }
        let action = fields[0] == "CMD" ? "\(fields[2]);\(fields[3])" : String(fields[3])
        guard Array(action.utf8) == reply.reference else { return nil }
        let text = reply.text ?? ""
        return .done(text.isEmpty ? action : text)
    }
}
