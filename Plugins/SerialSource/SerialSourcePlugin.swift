import GatewayCore
import NMEA
import SerialPorts
import SystemIO

/// Configuration of the `serial` source.
public struct SerialSourceConfiguration: Sendable {
    /// Which port to open.
    public enum Selector: Sendable, Equatable {
        /// A device path (`/dev/ttyACM0`, `/dev/serial/by-id/…`).
        case path(String)
        /// The first enumerated port whose USB ids, serial number and description match.
        case match(SerialPortMatch)
    }

    /// `port` or `match`.
    public var selector: Selector = .path("")
    /// A fixed rate, or nil to detect it among ``SerialSourceConfiguration/autoBaudRates``.
    public var baud: Int? = 9600
    /// Baud (when fixed), data bits, parity, stop bits, flow control.
    var line = SerialLineSettings()
    /// Lines written after opening, each ending in CR LF.
    public var initLines: [String] = []
    /// Turn each init line's body into `$BODY*HH` with its checksum.
    public var initChecksum = false
    /// No bytes for this long closes the port and reconnects.
    public var stallTimeout: Duration = .seconds(5)
    /// Longest wait between reconnection attempts.
    public var backoffCap: Duration = .seconds(5)
    /// Device id for positions; nil: the USB serial number when known, else the port path.
    public var device: String?
    /// Reject sentences without a `*HH` checksum.
    public var requireChecksum = true
    /// Health events; nil for none.
    public var health: HealthConfiguration?
    /// Sleep the receiver between windows; nil keeps it on.
    public var dutyCycle: DutyCycleConfiguration?

    /// Rates tried, in order, when `baud` is `"auto"`.
    public static let autoBaudRates = [4800, 9600, 19200, 38400, 57600, 115200]

    /// A configuration with every default (and no port).
    public init() {}

    /// The init lines as written to the port.
    public var initBytes: [UInt8] {
        var out: [UInt8] = []
        for line in initLines {
            if initChecksum {
                out += NMEAChecksum.sentence(body: line).utf8
            } else {
                out += line.utf8
                out += [13, 10]
            }
        }
        return out
    }
}

/// Picks a port by what libserialport's enumeration reports; every given field must match.
public struct SerialPortMatch: Sendable, Equatable {
    /// USB vendor id.
    public var vendorID: Int?
    /// USB product id.
    public var productID: Int?
    /// USB serial number, compared exactly.
    public var serialNumber: String?
    /// Substring of the description, manufacturer or product, compared case-insensitively.
    public var descriptionSubstring: String?

    /// A match on the given fields (nil fields match anything).
    public init(vendorID: Int? = nil, productID: Int? = nil, serialNumber: String? = nil, descriptionSubstring: String? = nil) {
        self.vendorID = vendorID
        self.productID = productID
        self.serialNumber = serialNumber
        self.descriptionSubstring = descriptionSubstring
    }

    /// Whether a port fits every given field.
    public func matches(_ port: SerialPortInfo) -> Bool {
        if let v = vendorID, port.vendorID != v { return false }
        if let p = productID, port.productID != p { return false }
        if let s = serialNumber, port.serialNumber != s { return false }
        if let d = descriptionSubstring?.lowercased() {
            let texts = [port.description, port.manufacturer ?? "", port.product ?? ""]
            if !texts.contains(where: { $0.lowercased().contains(d) }) { return false }
        }
        return true
    }

    /// `vid=1546 pid=01a7 serial="…" description="…"`, the fields that were given.
    public var text: String {
        var parts: [String] = []
        if let v = vendorID { parts.append("vid=\(hex4(v))") }
        if let p = productID { parts.append("pid=\(hex4(p))") }
        if let s = serialNumber { parts.append("serial=\"\(s)\"") }
        if let d = descriptionSubstring { parts.append("description=\"\(d)\"") }
        return parts.joined(separator: " ")
    }
}

/// Four lowercase hex digits, as lsusb writes USB ids.

/// The `serial` source: NMEA from a receiver on a serial port (USB, UART, Bluetooth), via libserialport.
public enum SerialSourcePlugin: SourcePlugin {
    public static let info = PluginInfo(
        type: "serial", kind: .source,
        summary: "Reads NMEA 0183 from a GNSS receiver on a serial port (USB, UART, Bluetooth) via libserialport, with hot-plug and stall recovery.",
        folder: "SerialSource",
        options: [
            OptionSpec("port", "path", default: "none", "Device path (/dev/ttyACM0, /dev/serial/by-id/…). Exactly one of port and match is required."),
            OptionSpec("match", "object", default: "none", "Pick the port by enumeration: { \"vid\": \"1546\", \"pid\": \"01a7\", \"serial\": \"…\", \"description\": \"u-blox\" } (ids hex; description is a case-insensitive substring of description, manufacturer or product). Re-enumerated on every reconnect."),
            OptionSpec("baud", "integer | \"auto\"", default: "9600", "Bits per second; \"auto\" tries 4800, 9600, 19200, 38400, 57600, 115200 and keeps the first that yields checksum-valid sentences."),
            OptionSpec("data_bits", "integer", default: "8", "Data bits, 5 to 8."),
            OptionSpec("parity", "none | odd | even | mark | space", default: "\"none\"", "Parity."),
            OptionSpec("stop_bits", "integer", default: "1", "Stop bits, 1 or 2."),
            OptionSpec("flow_control", "none | xonxoff | rtscts | dtrdsr", default: "\"none\"", "Flow control."),
            OptionSpec("init", "array", default: "[]", "Lines written to the receiver after every open (e.g. \"$PMTK220,100*2F\"); CR LF is added."),
            OptionSpec("init_checksum", "boolean", default: "false", "Treat init lines as sentence bodies (\"PMTK220,100\") and write them as $BODY*HH with the checksum computed."),
            OptionSpec("stall_timeout", "duration", default: "\"5s\"", "No bytes for this long counts as a fault: close and reconnect."),
            OptionSpec("backoff_cap", "duration", default: "\"5s\"", "Longest wait between reconnection attempts (exponential backoff from 200ms)."),
            OptionSpec("device", "string", default: "USB serial number, else the port path", "Device id given to every position."),
            OptionSpec("require_checksum", "boolean", default: "true", "Reject sentences without a *HH checksum."),
        ] + HealthConfiguration.optionSpecs + DutyCycleConfiguration.optionSpecs(methods: true, summary: "Wakes the receiver for a window of on every every and puts it to sleep in between (see Docs/Power-and-health.md); positions outside the windows are dropped (duty.outside_window)."),
        sample: #"{ "type": "serial", "port": "/dev/ttyACM0", "baud": 9600, "init": ["PMTK220,1000"], "init_checksum": true, "stall_timeout": "5s" }"#
    )

    public static func configure(_ options: inout OptionReader) -> SerialSourceConfiguration {
        var c = SerialSourceConfiguration()
        let port = options.string("port")
        let match = readMatch(&options)
        switch (port, match) {
        case (let p?, nil):
            if p.isEmpty { options.report("port", "must not be empty") }
            c.selector = .path(p)
        case (nil, let m?): c.selector = .match(m)
        case (.some, .some): options.report("match", "give either port or match, not both")
        case (nil, nil):
            if !options.has("match") { options.report("port", "required option is missing (or give match)") }
        }
        if let v = options.value("baud") {
            switch v {
            case .string("auto"): c.baud = nil
            case .number: c.baud = options.int("baud", default: 9600, in: 50...4_000_000)
            default: options.report("baud", "expected a number of bits per second or \"auto\", got \(v.jsonText)")
            }
        }
        c.line.dataBits = options.int("data_bits", default: 8, in: 5...8)
        c.line.parity = SerialLineSettings.Parity(rawValue: options.choice("parity", SerialLineSettings.Parity.allCases.map(\.rawValue), default: "none")) ?? .none
        c.line.stopBits = options.int("stop_bits", default: 1, in: 1...2)
        c.line.flowControl = SerialLineSettings.FlowControl(rawValue: options.choice("flow_control", SerialLineSettings.FlowControl.allCases.map(\.rawValue), default: "none")) ?? .none
        c.initLines = options.stringArray("init") ?? []
        c.initChecksum = options.bool("init_checksum", default: false)
        if c.initChecksum {
            for (i, line) in c.initLines.enumerated() where line.contains("*") {
                options.report("init[\(i)]", "already has a *HH checksum while init_checksum is true; give the body only, e.g. \"PMTK220,1000\"")
            }
        }
        c.stallTimeout = options.duration("stall_timeout", default: .seconds(5), minimum: .milliseconds(500))
        c.backoffCap = options.duration("backoff_cap", default: .seconds(5), minimum: .milliseconds(200))
        c.device = options.string("device")
        c.requireChecksum = options.bool("require_checksum", default: true)
        c.health = HealthConfiguration.read(&options)
        c.dutyCycle = DutyCycleConfiguration.read(&options, methods: true)
        if let b = c.baud { c.line.baud = b }
        return c
    }

    /// Reads the `match` object; nil when absent or when it has problems (reported).
    private static func readMatch(_ options: inout OptionReader) -> SerialPortMatch? {
        guard var m = options.object("match") else { return nil }
        var out = SerialPortMatch()
        var ok = true
        for key in ["vid", "pid"] {
            guard let v = m.value(key) else { continue }
            var id: Int?
            switch v {
            case .string(let s):
                var t = Substring(s.lowercased())
                if t.hasPrefix("0x") { t = t.dropFirst(2) }
                if t.count <= 4, let n = Int(t, radix: 16) { id = n }
            case .number(let n) where n == n.rounded() && n >= 0 && n <= 0xFFFF:
                id = Int(n)
            default: break
            }
            guard let id else {
                m.report(key, "expected a USB id as 4 hex digits such as \"1546\", got \(v.jsonText)")
                ok = false
                continue
            }
            if key == "vid" { out.vendorID = id } else { out.productID = id }
        }
        out.serialNumber = m.string("serial")
        out.descriptionSubstring = m.string("description")
        m.finish()
        if out.vendorID == nil && out.productID == nil && out.serialNumber == nil && (out.descriptionSubstring ?? "").isEmpty {
            if ok { options.report("match", "give at least one of vid, pid, serial, description") }
            return nil
        }
        return ok ? out : nil
    }

    /// The device path, or the match criteria: two sources cannot read one receiver.
    public static func claims(of configuration: SerialSourceConfiguration) -> [String] {
        switch configuration.selector {
        case .path(let p): ["serial port \(p)"]
        case .match(let m): ["serial port matching \(m.text)"]
        }
    }

    public static func makeSource(_ configuration: SerialSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        SerialNMEASource(configuration: configuration, context: context)
    }
}

extension SerialSourcePlugin {
    /// A port named by path should exist; only a warning, since receivers are plugged in later
    /// and the source waits for them.
    public static func checkEnvironment(_ configuration: SerialSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        guard case .path(let path) = configuration.selector else { return [] }
        guard let problem = FileCheck.existenceProblem(path) else { return [] }
        return [context.warning("port", "\(problem); the source waits for it to appear (hot-plug)")]
    }
}
