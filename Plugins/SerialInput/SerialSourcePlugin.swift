import GatewayCore
import NMEA
import NTRIP
import ReceiverSetup
import SerialPorts
import SystemIO
import EnvironmentChecks

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
    public var baud = SerialSourcePlugin.baud.defaultValue
    /// Baud (when fixed), data bits, parity, stop bits, flow control.
    var line = SerialLineSettings()
    /// Text lines of `init`, written after opening, each ending in CR LF.
    public var initLines: [String] = []
    /// UBX messages of `init`, sent after the text lines at every open, each awaiting its ACK.
    public var ubxInit: [UBXCommand] = []
    /// NTRIP corrections written into the port between reads; nil for none.
    public var corrections: NTRIPConfiguration?
    /// Turn each init line's body into `$BODY*HH` with its checksum.
    public var initChecksum = SerialSourcePlugin.initChecksum.defaultValue
    /// No bytes for this long closes the port and reconnects.
    public var stallTimeout = SerialSourcePlugin.stallTimeout.defaultValue
    /// Longest wait between reconnection attempts.
    public var backoffCap = SerialSourcePlugin.backoffCap.defaultValue
    /// Device id for positions; nil: the USB serial number when known, else the port path.
    public var device: String?
    /// Reject sentences without a `*HH` checksum.
    public var requireChecksum = SerialSourcePlugin.requireChecksum.defaultValue
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
    /// `baud`'s default: a speed, never `"auto"`, so the line settings start from it too.
    public static let defaultBaud = 9600
    /// nil is `"auto"`.
    public static let baud = Option<Int?>("baud", default: defaultBaud, typeName: "integer | \"auto\"",
        "Bits per second; \"auto\" tries 4800, 9600, 19200, 38400, 57600, 115200 and keeps the first that yields checksum-valid sentences.",
        jsonText: { $0.map(String.init) ?? OptionText.string("auto") },
        read: { key, reader in
            switch reader.value(key) {
            case nil: return nil
            case .string("auto")?: return .some(nil)
            case .number?: return reader.optionalInt(key, in: 50...4_000_000).map { .some($0) }
            case let other?:
                reader.report(key, "expected a number of bits per second or \"auto\", got \(other.jsonText)")
                return nil
            }
        })
    static let dataBits = Option("data_bits", default: 8, in: 5...8,
        "Data bits, 5 to 8.")
    static let parity = Option("parity", default: SerialLineSettings.Parity.none,
        "Parity.")
    static let stopBits = Option("stop_bits", default: 1, in: 1...2,
        "Stop bits, 1 or 2.")
    static let flowControl = Option("flow_control", default: SerialLineSettings.FlowControl.none,
        "Flow control.")
    static let initSpec = OptionSpec("init", "array", default: "[]",
        "Written to the receiver after every open: text lines (e.g. \"$PMTK220,100*2F\"; CR LF is added), then UBX messages, each awaiting ACK-ACK: {\"valset\": {KEY: value}, \"layers\": [\"ram\"]} (CFG-VALSET by u-blox key name or id) or {\"ubx\": \"hex\"}; optional \"timeout\" (1s). See the README's UBX section.")
    static let correctionsSpecs: [OptionSpec] = [
        OptionSpec("corrections", "object", default: "none", "NTRIP corrections written into the port between reads (RTK): the caster's RTCM 3 frames, CRC-checked, whole and in order; GGA sent back from the receiver's fix. See the README's Corrections section."),
        OptionSpec("corrections.url", "string", required: true, "ntrip://[USER[:PASSWORD]@]HOST[:PORT]/MOUNTPOINT (port 2101 when left out); list mountpoints with `locgate ntrip sourcetable`."),
        OptionSpec("corrections.user", "string", default: "none", "Basic authentication user (overrides one in url)."),
        OptionSpec("corrections.password", "string", default: "none", "Password; use ${secret:NAME}. Never logged."),
        OptionSpec("corrections.version", "integer", default: "2", "NTRIP version of the request: 1 (HTTP/1.0, ICY 200 OK) or 2 (HTTP/1.1, chunked). Either answer is understood."),
        OptionSpec("corrections.gga", "auto | always | never", default: #""auto""#, "Send the receiver's position as GGA upstream: auto when the mountpoint's sourcetable entry asks (nmea=1, or the mountpoint is not listed)."),
        OptionSpec("corrections.gga_interval", "duration", default: #""10s""#, "How often GGA is sent, once the receiver has a fix."),
        OptionSpec("corrections.stall_timeout", "duration", default: #""20s""#, "No byte from the caster for this long: reconnect."),
        OptionSpec("corrections.connect_timeout", "duration", default: #""10s""#, "Longest wait for the caster's TCP connection."),
        OptionSpec("corrections.backoff", "duration", default: #""10s""#, "First delay after a failure (at least 10s), doubled after each failure in a row, ±20% jitter."),
        OptionSpec("corrections.backoff_cap", "duration", default: #""5m""#, "Longest delay between attempts."),
        OptionSpec("corrections.unauthorized_retry", "duration", default: #""10m""#, "Delay after a 401 (wrong user or password); reported once."),
    ]
    public static let initChecksum = Option("init_checksum", default: false,
        "Treat init lines as sentence bodies (\"PMTK220,100\") and write them as $BODY*HH with the checksum computed.")
    public static let stallTimeout = Option("stall_timeout", default: Duration.seconds(5), minimum: .milliseconds(500),
        "No bytes for this long counts as a fault: close and reconnect.")
    public static let backoffCap = Option("backoff_cap", default: Duration.seconds(5), minimum: .milliseconds(200),
        "Longest wait between reconnection attempts (exponential backoff from 200ms).")
    public static let requireChecksum = Option("require_checksum", default: true,
        "Reject sentences without a *HH checksum.")

    public static let info = PluginInfo(
        type: "serial", kind: .source,
        summary: "Reads NMEA 0183 from a GNSS receiver on a serial port (USB, UART, Bluetooth) via libserialport, with hot-plug and stall recovery.",
        folder: "SerialInput",
        options: [
            OptionSpec("port", "path", default: "none", "Device path (/dev/ttyACM0, /dev/serial/by-id/…). Exactly one of port and match is required."),
            OptionSpec("match", "object", default: "none", "Pick the port by enumeration: { \"vid\": \"1546\", \"pid\": \"01a7\", \"serial\": \"…\", \"description\": \"u-blox\" } (ids hex; description is a case-insensitive substring of description, manufacturer or product). Re-enumerated on every reconnect."),
            baud.spec,
            dataBits.spec,
            parity.spec,
            stopBits.spec,
            flowControl.spec,
            initSpec,
            initChecksum.spec,
            stallTimeout.spec,
            backoffCap.spec,
            OptionSpec("device", "string", default: "USB serial number, else the port path", "Device id given to every position."),
            requireChecksum.spec,
        ] + correctionsSpecs + HealthConfiguration.optionSpecs + DutyCycleConfiguration.optionSpecs(methods: true, summary: "Wakes the receiver for a window of on every every and puts it to sleep in between (see Docs/Power-and-health.md); positions outside the windows are dropped (duty.outside_window)."),
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
        c.baud = options.read(baud)
        c.line.dataBits = options.read(dataBits)
        c.line.parity = options.read(parity)
        c.line.stopBits = options.read(stopBits)
        c.line.flowControl = options.read(flowControl)
        let steps = ReceiverInit.read("init", from: &options)
        c.initChecksum = options.read(initChecksum)
        for (i, step) in steps.enumerated() {
            switch step {
            case .text(let line):
                if c.initChecksum && line.contains("*") {
                    options.report("init[\(i)]", "already has a *HH checksum while init_checksum is true; give the body only, e.g. \"PMTK220,1000\"")
                }
                c.initLines.append(line)
            case .ubx(let command):
                c.ubxInit.append(command)
            }
        }
        if var corrections = options.object("corrections") {
            c.corrections = NTRIPConfiguration.read(&corrections)
            corrections.finish()
        }
        c.stallTimeout = options.read(stallTimeout)
        c.backoffCap = options.read(backoffCap)
        c.device = options.string("device")
        c.requireChecksum = options.read(requireChecksum)
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
