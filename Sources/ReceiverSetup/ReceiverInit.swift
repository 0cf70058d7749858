import GatewayCore
import UBX

/// One item of a source's `init`: a text line (NMEA, `$PMTK…`, written as the source writes
/// lines) or a UBX message.
public enum ReceiverInitStep: Sendable, Hashable {
    case text(String)
    case ubx(UBXCommand)
}

/// Reads a source's `init` list: strings are text lines as before; objects are UBX messages.
///
/// ```json
/// "init": [
///   "PMTK220,1000",
///   { "valset": { "CFG-RATE-MEAS": 100, "CFG-USBINPROT-RTCM3X": true, "0x20910009": 1 }, "layers": ["ram", "bbr"] },
///   { "ubx": "06 8A 00 01 00 00 01 00 21 30 64 00", "timeout": "2s" }
/// ]
/// ```
///
/// - `valset`: key → value; keys by u-blox name from ``UBXConfigKey/common`` or by id `0x…`;
///   values checked against the key's type (bool, whole number in range, number for R4/R8,
///   `"0x…"` for 64-bit values). More than 64 keys become several CFG-VALSETs.
/// - `layers`: any of `ram`, `bbr`, `flash`; default `["ram"]` — the source writes the items at
///   every open, so nothing needs to outlive a power cycle unless asked.
/// - `ubx`: hex bytes, spaces allowed: class, id and payload (length and checksum are added
///   here), or a whole frame from `B5 62` with its length and checksum (both checked).
/// - `timeout`: how long to wait for ACK-ACK/ACK-NAK (default 1 s; only CFG messages are answered).
///
/// Every problem is reported at its JSON path (`init[1].valset.CFG-RATE-MEAS`) and reading goes
/// on, so one validation lists them all.
public enum ReceiverInit {
    public static let defaultTimeout: Duration = .seconds(1)
    static let objectKeys = ["valset", "layers", "ubx", "timeout"]
    static let layerNames: [(String, UBXValset.Layers)] = [("ram", .ram), ("bbr", .bbr), ("flash", .flash)]

    /// Reads the option `key` of `options` (absent: no steps).
    public static func read(_ key: String, from options: inout OptionReader) -> [ReceiverInitStep] {
        guard let value = options.value(key) else { return [] }
        guard case .array(let items) = value else {
            options.report(key, "expected an array of text lines and UBX messages, got \(value.kindName)")
            return []
        }
        var steps: [ReceiverInitStep] = []
        for (i, item) in items.enumerated() {
            let at = "\(key)[\(i)]"
            switch item {
            case .string(let s):
                steps.append(.text(options.substitute(s, at: at)))
            case .object(let o):
                steps += ubx(o, at: at, options: options).map(ReceiverInitStep.ubx)
            default:
                options.report(at, "expected a text line or a UBX message object ({\"valset\": …} or {\"ubx\": \"hex\"}), got \(item.kindName)")
            }
        }
        return steps
    }

    static func ubx(_ o: JSONObject, at: String, options: OptionReader) -> [UBXCommand] {
        for m in o where !objectKeys.contains(m.key) {
            options.report("\(at).\(m.key)", "unknown option\(Suggestion.hint(Suggestion.closest(to: m.key, among: objectKeys))); options: \(objectKeys.joined(separator: ", "))")
        }
        var timeout = defaultTimeout
        if let t = o["timeout"] {
            let text: String? = if case .string(let s) = t { options.substitute(s, at: "\(at).timeout") } else { nil }
            if case .number(let n) = t, n > 0, n <= 3600 {
                timeout = .milliseconds(Int64((n * 1000).rounded()))
            } else if let text, let d = DurationText.parse(text), d > .zero {
                timeout = d
            } else {
                options.report("\(at).timeout", "expected a duration such as \"1s\" (more than 0), got \(t.jsonText)")
                return []
            }
        }
        switch (o["valset"], o["ubx"]) {
        case (nil, nil):
            options.report(at, "a UBX message needs \"valset\" (key → value) or \"ubx\" (hex bytes)")
            return []
        case (.some, .some):
            options.report(at, "give either \"valset\" or \"ubx\", not both")
            return []
        case (let valset?, nil):
            if o["layers"] == nil { return valsets(valset, layers: .ram, at: at, timeout: timeout, options: options) }
            guard let layers = layers(o["layers"], at: "\(at).layers", options: options) else { return [] }
            return valsets(valset, layers: layers, at: at, timeout: timeout, options: options)
        case (nil, let hex?):
            if o["layers"] != nil { options.report("\(at).layers", "layers go with \"valset\"; a raw \"ubx\" message carries its own") }
            guard case .string(let s) = hex else {
                options.report("\(at).ubx", "expected hex bytes as a string, got \(hex.kindName)")
                return []
            }
            guard let frame = rawFrame(options.substitute(s, at: "\(at).ubx"), at: "\(at).ubx", options: options) else { return [] }
            let id = UBXMessageID(frame[2], frame[3])
            return [UBXCommand(label: at, summary: "\(id) (\(frame.count - UBXFrame.overhead) payload bytes)", frame: frame, timeout: timeout)]
        }
    }

    static func layers(_ value: JSONValue?, at: String, options: OptionReader) -> UBXValset.Layers? {
        guard case .array(let names)? = value, !names.isEmpty else {
            options.report(at, "expected a non-empty array of \"ram\", \"bbr\", \"flash\"")
            return nil
        }
        var layers: UBXValset.Layers = []
        for (i, n) in names.enumerated() {
            guard case .string(let s) = n, let layer = layerNames.first(where: { $0.0 == s.lowercased() })?.1 else {
                options.report("\(at)[\(i)]", "expected \"ram\", \"bbr\" or \"flash\", got \(n.jsonText)")
                return nil
            }
            layers.insert(layer)
        }
        return layers
    }

    static func valsets(_ value: JSONValue, layers: UBXValset.Layers, at: String, timeout: Duration, options: OptionReader) -> [UBXCommand] {
        guard case .object(let o) = value else {
            options.report("\(at).valset", "expected an object of key → value, got \(value.kindName)")
            return []
        }
        guard o.count > 0 else {
            options.report("\(at).valset", "must not be empty")
            return []
        }
        var items: [UBXValset.Item] = []
        var ok = true
        for m in o {
            let path = "\(at).valset.\(m.key)"
            guard let key = UBXConfigKey.named(m.key) else {
                let names = UBXConfigKey.common.map(\.name)
                let guess = Suggestion.closest(to: m.key.uppercased(), among: names)
                options.report(path, "unknown configuration key\(Suggestion.hint(guess)); give keys outside locgate's table by id (\"0x30210001\"), see Plugins/SerialInput/README.md")
                ok = false
                continue
            }
            var number: Double?, bool: Bool?, hex: String?
            switch m.value {
            case .number(let n): number = n
            case .bool(let b): bool = b
            case .string(let s): hex = options.substitute(s, at: path)
            default: break
            }
            switch UBXValset.bits(for: key, number: number, bool: bool, hex: hex) {
            case .success(let bits): items.append(UBXValset.Item(key: key, bits: bits))
            case .failure:
                options.report(path, "expected \(UBXValset.range(key.type)) for \(key.name), got \(m.value.jsonText)")
                ok = false
            }
        }
        guard ok else { return [] }
        let layerText = layerNames.filter { layers.contains($0.1) }.map(\.0).joined(separator: "+")
        let parts = stride(from: 0, to: items.count, by: UBXValset.maximumItems).map { Array(items[$0..<min($0 + UBXValset.maximumItems, items.count)]) }
        return parts.enumerated().map { k, part in
            UBXCommand(label: parts.count == 1 ? at : "\(at) part \(k + 1)",
                       summary: "CFG-VALSET (\(layerText)) " + part.map(\.text).joined(separator: ", "),
                       frame: UBXValset.frame(part, layers: layers), timeout: timeout)
        }
    }

    /// A frame from hex: class, id and payload, or a whole frame from `B5 62` (checksum checked).
    static func rawFrame(_ text: String, at: String, options: OptionReader) -> [UInt8]? {
        var bytes: [UInt8] = []
        var pending: UInt8?
        for c in text.unicodeScalars {
            if c == " " || c == "\t" || c == "," || c == ":" { continue }
            guard let v = UInt8(String(c), radix: 16) else {
                options.report(at, "expected hex bytes (\"06 8A 09 00 …\"), found \"\(Character(c))\"")
                return nil
            }
            if let p = pending { bytes.append(p << 4 | v); pending = nil } else { pending = v }
        }
        if pending != nil {
            options.report(at, "an odd number of hex digits")
            return nil
        }
        if bytes.count >= 2 && bytes[0] == UBXFrame.sync1 && bytes[1] == UBXFrame.sync2 {
            let check = bytes.withUnsafeBytes { UBXFrame.check($0, maxPayload: 0xFFFF) }
            guard check == .frame(length: bytes.count) else {
                let why = switch check {
                case .notFrame(.badChecksum): "its checksum is wrong"
                case .incomplete: "it is shorter than its length field says"
                default: "its length field does not match its \(bytes.count) bytes"
                }
                options.report(at, "not one whole UBX frame: \(why) (or give class, id and payload without B5 62 and the checksum is computed)")
                return nil
            }
            return bytes
        }
        guard bytes.count >= 2 else {
            options.report(at, "needs at least the class and id bytes")
            return nil
        }
        guard bytes.count - 2 <= 0xFFFF else {
            options.report(at, "a UBX payload holds at most 65535 bytes")
            return nil
        }
        return UBXFrame.encode(UBXMessageID(bytes[0], bytes[1]), payload: Array(bytes[2...]))
    }
}
