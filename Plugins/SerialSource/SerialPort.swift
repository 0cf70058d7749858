// The only file that talks to libserialport (and to the few POSIX calls around it): every
// return code goes through `check`, the port lives in `SerialPortHandle` and is freed in deinit,
// and no C type leaves this file.
import CSerialPort
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Why a serial port operation failed, classified so the source can say what to do about it.
public struct SerialPortError: Error, Sendable, CustomStringConvertible {
    /// The classes of failure a user can act on.
    public enum Kind: String, Sendable {
        /// No such device (not plugged in, wrong path).
        case missing
        /// The process may not open the device (not in group `dialout`).
        case permissionDenied
        /// Another process holds the port.
        case busy
        /// The device went away while open (USB unplug, the far end of a pty closed).
        case disconnected
        /// libserialport cannot handle this kind of device (a pseudo-terminal).
        case unsupported
        /// Anything else.
        case failed
    }

    public var kind: Kind
    /// What was being done, e.g. `open /dev/ttyACM0`.
    public var operation: String
    /// The system's or libserialport's reason.
    public var detail: String

    /// `operation: detail`.
    public var description: String { detail.isEmpty ? operation : "\(operation): \(detail)" }

    static func classify(errno code: Int32) -> Kind {
        switch code {
        case EACCES, EPERM: .permissionDenied
        case EBUSY, EWOULDBLOCK: .busy
        case ENOENT, ENODEV, ENXIO: .missing
        case EIO: .disconnected
        default: .failed
        }
    }
}

/// Line settings applied when a port is opened.
struct SerialLineSettings: Sendable, Equatable {
    enum Parity: String, Sendable, CaseIterable { case none, odd, even, mark, space }
    enum FlowControl: String, Sendable, CaseIterable { case none, xonxoff, rtscts, dtrdsr }

    var baud = 9600
    var dataBits = 8
    var parity: Parity = .none
    var stopBits = 1
    var flowControl: FlowControl = .none
}

/// One serial port as libserialport's enumeration reports it.
public struct SerialPortInfo: Sendable, Hashable {
    /// How the port is attached.
    public enum Transport: String, Sendable {
        case native, usb, bluetooth
    }

    /// Device path, e.g. `/dev/ttyACM0`.
    public var path: String
    /// libserialport's one-line description (for USB: the product string, else the driver).
    public var description: String
    /// Native UART, USB adapter or Bluetooth.
    public var transport: Transport
    /// USB vendor id, when the port is a USB adapter.
    public var vendorID: Int?
    /// USB product id, when the port is a USB adapter.
    public var productID: Int?
    /// USB manufacturer string.
    public var manufacturer: String?
    /// USB product string.
    public var product: String?
    /// USB serial number: the stable identity of a receiver.
    public var serialNumber: String?
    /// Bluetooth MAC address, for Bluetooth serial ports.
    public var bluetoothAddress: String?

    /// A port description (enumeration builds these; tests build them by hand).
    public init(path: String, description: String = "", transport: Transport = .native,
                vendorID: Int? = nil, productID: Int? = nil, manufacturer: String? = nil,
                product: String? = nil, serialNumber: String? = nil, bluetoothAddress: String? = nil) {
        self.path = path
        self.description = description
        self.transport = transport
        self.vendorID = vendorID
        self.productID = productID
        self.manufacturer = manufacturer
        self.product = product
        self.serialNumber = serialNumber
        self.bluetoothAddress = bluetoothAddress
    }

    /// Every serial port the system reports, sorted by path.
    public static func list() throws(SerialPortError) -> [SerialPortInfo] {
        var list: UnsafeMutablePointer<OpaquePointer?>?
        try check(sp_list_ports(&list), "list serial ports")
        guard let list else { return [] }
        defer { sp_free_port_list(list) }
        var out: [SerialPortInfo] = []
        var i = 0
        while let port = list[i] {
            out.append(SerialPortInfo(port: port))
            i += 1
        }
        return out.sorted { $0.path < $1.path }
    }

    fileprivate init(port: OpaquePointer) {
        path = cString(sp_get_port_name(port)) ?? ""
        description = cString(sp_get_port_description(port)) ?? ""
        let t = sp_get_port_transport(port)
        transport = t == SP_TRANSPORT_USB ? .usb : t == SP_TRANSPORT_BLUETOOTH ? .bluetooth : .native
        if transport == .usb {
            var vid: Int32 = 0, pid: Int32 = 0
            if sp_get_port_usb_vid_pid(port, &vid, &pid) == SP_OK {
                vendorID = Int(vid)
                productID = Int(pid)
            }
            manufacturer = cString(sp_get_port_usb_manufacturer(port))
            product = cString(sp_get_port_usb_product(port))
            serialNumber = cString(sp_get_port_usb_serial(port))
        }
        if transport == .bluetooth { bluetoothAddress = cString(sp_get_port_bluetooth_address(port)) }
    }
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
            try check(sp_get_port_by_name(device, &found), "look up \(device)")
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
        try check(sp_open(port, SP_MODE_READ_WRITE), "open \(path)")
        isOpen = true
        var handle: Int32 = -1
        try check(sp_get_port_handle(port, &handle), "get the descriptor of \(path)")
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
        try check(sp_new_config(&config), "allocate a port configuration")
        guard let config else { throw SerialPortError(kind: .failed, operation: "allocate a port configuration", detail: "") }
        defer { sp_free_config(config) }
        try check(sp_set_config_baudrate(config, Int32(settings.baud)), "baud \(settings.baud)")
        try check(sp_set_config_bits(config, Int32(settings.dataBits)), "data bits \(settings.dataBits)")
        let parity: sp_parity = switch settings.parity {
        case .none: SP_PARITY_NONE
        case .odd: SP_PARITY_ODD
        case .even: SP_PARITY_EVEN
        case .mark: SP_PARITY_MARK
        case .space: SP_PARITY_SPACE
        }
        try check(sp_set_config_parity(config, parity), "parity \(settings.parity.rawValue)")
        try check(sp_set_config_stopbits(config, Int32(settings.stopBits)), "stop bits \(settings.stopBits)")
        let flow: sp_flowcontrol = switch settings.flowControl {
        case .none: SP_FLOWCONTROL_NONE
        case .xonxoff: SP_FLOWCONTROL_XONXOFF
        case .rtscts: SP_FLOWCONTROL_RTSCTS
        case .dtrdsr: SP_FLOWCONTROL_DTRDSR
        }
        try check(sp_set_config_flowcontrol(config, flow), "flow control \(settings.flowControl.rawValue)")
        try check(sp_set_config(port, config), "configure \(info.path)")
    }

    /// Changes only the baud rate (baud detection), and drops what arrived at the old rate.
    func setBaud(_ baud: Int) throws(SerialPortError) {
        try check(sp_set_baudrate(port, Int32(baud)), "baud \(baud)")
        try check(sp_flush(port, SP_BUF_INPUT), "flush input")
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
            let n = try check(sp_nonblocking_read(port, buffer.baseAddress, buffer.count), "read \(info.path)")
            // Readable but nothing to read is end of file: the tty was hung up.
            if n > 0 { return n }
        }
        throw SerialPortError(kind: .disconnected, operation: "read \(info.path)", detail: "the device hung up")
    }

    /// Writes all of `bytes`, waiting up to `timeoutMilliseconds`; returns how many were written.
    func write(_ bytes: [UInt8], timeoutMilliseconds: UInt32) throws(SerialPortError) -> Int {
        let result = bytes.withUnsafeBytes { sp_blocking_write(port, $0.baseAddress, $0.count, timeoutMilliseconds) }
        return try check(result, "write \(info.path)")
    }
}

/// Turns a libserialport result into a count or a classified error.
@discardableResult
private func check(_ result: sp_return, _ operation: @autoclosure () -> String) throws(SerialPortError) -> Int {
    let code = result.rawValue
    if code >= 0 { return Int(code) }
    switch result {
    case SP_ERR_FAIL:
        // libserialport leaves the system error in errno and reports it through sp_last_error_*.
        let errorCode = sp_last_error_code()
        var message = ""
        if let m = sp_last_error_message() {
            message = String(cString: m)
            sp_free_error_message(m)
        }
        return try failure(SerialPortError(kind: SerialPortError.classify(errno: errorCode), operation: operation(), detail: message))
    case SP_ERR_ARG:
        // sp_get_port_by_name answers SP_ERR_ARG when sysfs has no entry for the device.
        let errorCode = errno
        let kind = SerialPortError.classify(errno: errorCode)
        return try failure(SerialPortError(kind: kind == .failed ? .unsupported : kind, operation: operation(),
                                           detail: "invalid argument or not a serial device (\(String(cString: strerror(errorCode))))"))
    case SP_ERR_MEM:
        return try failure(SerialPortError(kind: .failed, operation: operation(), detail: "out of memory"))
    case SP_ERR_SUPP:
        return try failure(SerialPortError(kind: .unsupported, operation: operation(), detail: "not supported by this device or system"))
    default:
        return try failure(SerialPortError(kind: .failed, operation: operation(), detail: "libserialport error \(code)"))
    }
}

private func failure(_ error: SerialPortError) throws(SerialPortError) -> Int { throw error }

/// A libserialport string (owned by the port), or nil when absent or empty.
private func cString(_ p: UnsafeMutablePointer<CChar>?) -> String? {
    guard let p else { return nil }
    let s = String(cString: p)
    return s.isEmpty ? nil : s
}
