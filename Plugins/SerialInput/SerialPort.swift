// The only file of the plugin that talks to libserialport (and to the few POSIX calls around
// it): every return code goes through SerialPorts' `serialPortCheck`, the port lives in
// `SerialPortHandle` and is freed in deinit, and no C type leaves this file.
import CSerialPort
import SerialPorts
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Line settings applied when a port is opened.
struct SerialLineSettings: Sendable, Equatable {
    enum Parity: String, Sendable, CaseIterable { case none, odd, even, mark, space }
    enum FlowControl: String, Sendable, CaseIterable { case none, xonxoff, rtscts, dtrdsr }

    /// The line's speed; `"auto"` tries several before a port is opened for good.
    var baud = SerialSourcePlugin.defaultBaud
    var dataBits = SerialSourcePlugin.dataBits.defaultValue
    var parity = SerialSourcePlugin.parity.defaultValue
    var stopBits = SerialSourcePlugin.stopBits.defaultValue
    var flowControl = SerialSourcePlugin.flowControl.defaultValue
}

/// An open serial port. Not thread-safe: one caller at a time (the source's run loop).
final class SerialPortHandle: @unchecked Sendable {
    private let port: OpaquePointer
    private var isOpen = false
    private var fd: Int32 = -1
    /// What libserialport reports about the device that was opened.
    let info: SerialPortInfo

    /// Resolves `path` (symlinks such as `/dev/serial/by-id/…`), opens it read/write and takes an
    /// exclusive advisory lock, so two locgate processes cannot read one receiver.
    init(path: String) throws(SerialPortError) {
        let device = try SerialPortHandle.resolve(path)
        var found: OpaquePointer?
        do {
            try serialPortCheck(sp_get_port_by_name(device, &found), "look up \(device)")
        } catch {
            if device.hasPrefix("/dev/pts/") {
                throw SerialPortError(kind: .unsupported, operation: "open \(path)",
                                      detail: "\(device) is a pseudo-terminal, which libserialport 0.1.1 cannot open")
            }
            throw error
        }
        guard let found else { throw SerialPortError(kind: .failed, operation: "look up \(device)", detail: "no port returned") }
        port = found
        info = SerialPortInfo(port: found)
        // From here on deinit runs if the initialiser throws, so the port is always freed.
        try serialPortCheck(sp_open(port, SP_MODE_READ_WRITE), "open \(path)")
        isOpen = true
        var handle: Int32 = -1
        try serialPortCheck(sp_get_port_handle(port, &handle), "get the descriptor of \(path)")
        fd = handle
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            throw SerialPortError(kind: code == EWOULDBLOCK ? .busy : .failed, operation: "lock \(path)", detail: String(cString: strerror(code)))
        }
    }

    deinit {
        if isOpen { sp_close(port) }
        sp_free_port(port)
    }

    /// The device node behind `path`, with symlinks resolved: libserialport 0.1.1 looks ports up
    /// by their `/dev/<name>` in sysfs and does not follow links itself.
    static func resolve(_ path: String) throws(SerialPortError) -> String {
        guard let resolved = realpath(path, nil) else {
            let code = errno
            throw SerialPortError(kind: SerialPortError.classify(errno: code), operation: "open \(path)", detail: String(cString: strerror(code)))
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Applies the line settings.
    func apply(_ settings: SerialLineSettings) throws(SerialPortError) {
        var config: OpaquePointer?
        try serialPortCheck(sp_new_config(&config), "allocate a port configuration")
        guard let config else { throw SerialPortError(kind: .failed, operation: "allocate a port configuration", detail: "") }
        defer { sp_free_config(config) }
        try serialPortCheck(sp_set_config_baudrate(config, Int32(settings.baud)), "baud \(settings.baud)")
        try serialPortCheck(sp_set_config_bits(config, Int32(settings.dataBits)), "data bits \(settings.dataBits)")
        let parity: sp_parity = switch settings.parity {
        case .none: SP_PARITY_NONE
        case .odd: SP_PARITY_ODD
        case .even: SP_PARITY_EVEN
        case .mark: SP_PARITY_MARK
        case .space: SP_PARITY_SPACE
        }
        try serialPortCheck(sp_set_config_parity(config, parity), "parity \(settings.parity.rawValue)")
        try serialPortCheck(sp_set_config_stopbits(config, Int32(settings.stopBits)), "stop bits \(settings.stopBits)")
        let flow: sp_flowcontrol = switch settings.flowControl {
        case .none: SP_FLOWCONTROL_NONE
        case .xonxoff: SP_FLOWCONTROL_XONXOFF
        case .rtscts: SP_FLOWCONTROL_RTSCTS
        case .dtrdsr: SP_FLOWCONTROL_DTRDSR
        }
        try serialPortCheck(sp_set_config_flowcontrol(config, flow), "flow control \(settings.flowControl.rawValue)")
        try serialPortCheck(sp_set_config(port, config), "configure \(info.path)")
    }

    /// Changes only the baud rate (baud detection), and drops what arrived at the old rate.
    func setBaud(_ baud: Int) throws(SerialPortError) {
        try serialPortCheck(sp_set_baudrate(port, Int32(baud)), "baud \(baud)")
        try serialPortCheck(sp_flush(port, SP_BUF_INPUT), "flush input")
    }

    /// The port's descriptor, for waiting on it with a ``Wakeup``; valid while the handle lives.
    var descriptor: Int32 { fd }

    /// Reads what is there after a wait reported the descriptor ready; never blocks.
    ///
    /// libserialport's own blocking reads cannot tell a hung-up device from silence (after a USB
    /// unplug `select` keeps reporting the descriptor readable and `read` returns 0), so the
    /// caller polls the descriptor itself, which reports the hang-up, and the bytes are read
    /// through `sp_nonblocking_read`.
    func read(into buffer: UnsafeMutableRawBufferPointer, ready: Readiness) throws(SerialPortError) -> Int {
        if ready.isFailed {
            throw SerialPortError(kind: .disconnected, operation: "read \(info.path)", detail: "device error or hang-up")
        }
        if ready.isReadable {
            let n = try serialPortCheck(sp_nonblocking_read(port, buffer.baseAddress, buffer.count), "read \(info.path)")
            // Readable but nothing to read is end of file: the tty was hung up.
            if n > 0 { return n }
        }
        throw SerialPortError(kind: .disconnected, operation: "read \(info.path)", detail: "the device hung up")
    }

    /// Writes all of `bytes`, waiting up to `timeoutMilliseconds`; returns how many were written.
    func write(_ bytes: [UInt8], timeoutMilliseconds: UInt32) throws(SerialPortError) -> Int {
        let result = bytes.withUnsafeBytes { sp_blocking_write(port, $0.baseAddress, $0.count, timeoutMilliseconds) }
        return try serialPortCheck(result, "write \(info.path)")
    }
}
