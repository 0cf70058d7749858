import Foundation
import GatewayCore
import GatewayTesting
import NMEA
import SerialPorts
import SerialInput
import Testing

/// Reads `json` as the options of a `serial` source; returns the configuration and the problems.
private func configure(_ json: String) throws -> (SerialSourceConfiguration, [String]) {
    guard case .object(let object) = try JSONValue.parse(string: json) else { throw TestFailure("not an object") }
    let diagnostics = ConfigurationDiagnostics()
    var reader = OptionReader(object: object, path: "sources.rx", diagnostics: diagnostics)
    reader.markKnown(["type"])
    let c = SerialSourcePlugin.configure(&reader)
    reader.finish()
    return (c, diagnostics.problems.map(\.description))
}

@Suite struct SerialConfigurationTests {
    @Test func theSampleConfigurationIsValid() throws {
        let (c, problems) = try configure(SerialSourcePlugin.info.sample)
        #expect(problems.isEmpty)
        #expect(c.selector == .path("/dev/ttyACM0"))
        #expect(c.initBytes == Array("$PMTK220,1000*1F\r\n".utf8))
    }

    @Test func defaultsFollowTheIssue() throws {
        let (c, problems) = try configure(#"{ "type": "serial", "port": "/dev/ttyUSB0" }"#)
        #expect(problems.isEmpty)
        #expect(c.baud == 9600)
        #expect(c.stallTimeout == .seconds(5))
        #expect(c.backoffCap == .seconds(5))
        #expect(c.requireChecksum)
        #expect(c.device == nil)
        #expect(SerialSourcePlugin.claims(of: c) == ["serial port /dev/ttyUSB0"])
    }

    @Test func everyDocumentedOptionIsReadAndNoOther() throws {
        let json = #"""
        { "type": "serial", "port": "/dev/ttyUSB0", "baud": "auto", "data_bits": 7, "parity": "even", "stop_bits": 2,
          "flow_control": "rtscts", "init": ["PUBX,40,GLL,0,0,0,0"], "init_checksum": true, "stall_timeout": "2s",
          "backoff_cap": "10s", "device": "rx-1", "require_checksum": false,
          "health": { "fix_timeout": "20s", "data_timeout": "4s" },
          "duty_cycle": { "on": "10s", "every": "2m", "offset": "15s", "method": "commands", "sleep": ["$PMTK161,0*28"], "wake": [""],
                          "emit": "best", "max_hdop": 3, "max_horizontal_error": 20 } }
        """#
        let object = try #require(try JSONValue.parse(string: json).objectValue)
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "sources.rx", diagnostics: diagnostics)
        let c = SerialSourcePlugin.configure(&reader)
        #expect(diagnostics.problems.isEmpty)
        let asked = reader.askedKeys.filter { $0 != "type" }
        // Nested members are documented as dotted rows ("health.fix_timeout"); the reader asks for the object.
        #expect(Set(asked) == Set(SerialSourcePlugin.info.options.map(\.name).filter { !$0.contains(".") }))
        #expect(c.health == HealthConfiguration(fixTimeout: .seconds(20), dataTimeout: .seconds(4)))
        #expect(c.dutyCycle?.schedule == DutySchedule(on: .seconds(10), every: .seconds(120), offset: .seconds(15)))
        #expect(c.dutyCycle?.maxHDOP == 3 && c.dutyCycle?.maxHorizontalError == 20 && c.dutyCycle?.method == .commands)
        #expect(c.dutyCycle.map(ReceiverPowerCommands.sleep) == Array("$PMTK161,0*28\r\n".utf8))
        #expect(c.dutyCycle.map(ReceiverPowerCommands.wake) == [13, 10])
        #expect(c.baud == nil)
        #expect(c.stallTimeout == .seconds(2))
        #expect(c.backoffCap == .seconds(10))
        #expect(c.device == "rx-1")
        #expect(!c.requireChecksum)
        #expect(c.initBytes == Array(NMEAChecksum.sentence(body: "PUBX,40,GLL,0,0,0,0").utf8))
    }

    @Test(arguments: [
        (#"{ "type": "serial" }"#, "sources.rx.port: required option is missing"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "match": { "vid": "1546" } }"#, "sources.rx.match: give either port or match, not both"),
        (#"{ "type": "serial", "match": {} }"#, "sources.rx.match: give at least one of vid, pid, serial, description"),
        (#"{ "type": "serial", "match": { "vid": "xyz" } }"#, "sources.rx.match.vid: expected a USB id"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "baud": "fast" }"#, "sources.rx.baud: expected a number of bits per second or \"auto\""),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "parity": "weird" }"#, "sources.rx.parity: expected one of"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "data_bits": 9 }"#, "sources.rx.data_bits: must be between 5 and 8"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "init": ["$PMTK220,1000*1F"], "init_checksum": true }"#, "sources.rx.init[0]: already has a *HH checksum"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "baud_rate": 9600 }"#, "sources.rx.baud_rate: unknown option"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "2m", "every": "1m", "method": "ublox" } }"#, "sources.rx.duty_cycle.on: must be shorter than every (1m)"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "10s", "every": "1m", "method": "sirf" } }"#, "sources.rx.duty_cycle.method: unknown method \"sirf\""),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "10s", "every": "1m" } }"#, "sources.rx.duty_cycle.method: required option is missing"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "10s", "every": "1m", "method": "commands" } }"#, "sources.rx.duty_cycle.sleep: method \"commands\" needs"),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "duty_cycle": { "on": "10s", "every": "1m", "method": "mtk", "sleep": ["X"] } }"#, "sources.rx.duty_cycle.sleep: only used with method \"commands\""),
        (#"{ "type": "serial", "port": "/dev/ttyS0", "health": { "fix_timeout": "soon" } }"#, "sources.rx.health.fix_timeout: expected a duration"),
    ])
    func problemsAreReportedWithTheirPath(json: String, expected: String) throws {
        let (_, problems) = try configure(json)
        #expect(problems.contains { $0.hasPrefix(expected) }, "problems: \(problems)")
    }

    @Test func matchPicksPortsByUSBIdsSerialAndDescription() throws {
        let (c, problems) = try configure(#"{ "type": "serial", "match": { "vid": "1546", "pid": "0x01A7", "description": "U-BLOX" } }"#)
        #expect(problems.isEmpty)
        guard case .match(let m) = c.selector else { Issue.record("expected a match selector"); return }
        let ublox = SerialPortInfo(path: "/dev/ttyACM1", description: "u-blox 7 - GPS/GNSS Receiver", transport: .usb,
                                   vendorID: 0x1546, productID: 0x01A7, manufacturer: "u-blox AG", product: "u-blox 7 - GPS/GNSS Receiver", serialNumber: "A1")
        let other = SerialPortInfo(path: "/dev/ttyUSB0", description: "FT232R", transport: .usb, vendorID: 0x0403, productID: 0x6001)
        #expect(m.matches(ublox))
        #expect(!m.matches(other))
        #expect(!SerialPortMatch(serialNumber: "B2").matches(ublox))
        #expect(SerialSourcePlugin.claims(of: c) == ["serial port matching vid=1546 pid=01a7 description=\"U-BLOX\""])
    }

    /// The exact bytes on the wire, checked against values computed by hand from the u-blox 8
    /// protocol description (Fletcher-8 over class..payload) and the NMEA XOR checksum.
    @Test func powerCommandBytesAreExact() {
        #expect(ReceiverPowerCommands.ubloxBackup == [
            0xB5, 0x62, 0x02, 0x41, 0x10, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
            0x61, 0x6B,
        ])
        #expect(ReceiverPowerCommands.mtkStandby == Array("$PMTK161,0*28\r\n".utf8))
        #expect(NMEAChecksum.sentence(body: "PMTK161,0") == "$PMTK161,0*28\r\n")
        // UBX-CFG-RXM continuous mode as published (B5 62 06 11 02 00 08 00 21 91): the framing is right.
        #expect(ReceiverPowerCommands.ubx(class: 0x06, id: 0x11, payload: [0x08, 0x00]).suffix(2) == [0x21, 0x91])
    }

    @Test func theReadmeDocumentsEveryOptionInOrder() throws {
        let readme = try String(contentsOfFile: PackagePaths.root + "/Plugins/SerialInput/README.md", encoding: .utf8)
        // The rows of the table under "## Options", up to the next heading.
        let section = readme.components(separatedBy: "## Options").last?.components(separatedBy: "\n## ").first ?? ""
        let rows = section.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { line in
            line.split(separator: "|")[0].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
        }
        #expect(rows == SerialSourcePlugin.info.options.map(\.name))
    }
}

/// `init` with UBX messages and `corrections`, read with their paths.
@Suite struct SerialReceiverOptionsTests {
    @Test func initMixesTextLinesAndUBXMessages() throws {
        let c = try PluginOptions.valid(SerialSourcePlugin.self, """
        { "port": "/dev/ttyACM0", "init": ["PMTK220,1000", {"valset": {"CFG-RATE-MEAS": 100}}, {"ubx": "0A 04"}], "init_checksum": true }
        """)
        #expect(c.initLines == ["PMTK220,1000"])
        #expect(c.ubxInit.map(\.summary) == ["CFG-VALSET (ram) CFG-RATE-MEAS=100", "UBX-0A-04 (0 payload bytes)"])
    }

    @Test func correctionsAreReadAndTheirProblemsHaveTheirPaths() throws {
        let c = try PluginOptions.valid(SerialSourcePlugin.self, """
        { "port": "/dev/ttyACM0", "corrections": { "url": "ntrip://caster.example/VRS", "user": "u", "password": "${secret:P}", "gga_interval": "5s" } }
        """, environment: ["P": "pw"])
        #expect(c.corrections?.host == "caster.example" && c.corrections?.mountpoint == "VRS" && c.corrections?.password == "pw")
        #expect(c.corrections?.ggaInterval == .seconds(5))
        let (_, problems) = try PluginOptions.read(SerialSourcePlugin.self, """
        { "port": "/dev/ttyACM0", "init": [{"valset": {"CFG-RATE-MEAS": -1}}],
          "corrections": { "url": "ntrip://caster.example", "backoff": "1s", "ggainterval": "5s" } }
        """)
        #expect(problems.map(\.path) == [
            "sources.under_test.init[0].valset.CFG-RATE-MEAS",
            "sources.under_test.corrections.url",
            "sources.under_test.corrections.backoff",
            "sources.under_test.corrections.ggainterval",
        ], "\(problems)")
    }
}
