// The serial ports of this machine as libserialport enumerates them, for `locgate ports` and the
// `serial` source's `match`, and the classified errors of libserialport calls. The only file of
// this module that talks to libserialport; the source's open port (Plugins/SerialInput) is the
// other one, and uses `serialPortCheck` from here so that both classify failures alike.
import CSerialPort
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

    public init(kind: Kind, operation: String, detail: String) {
        self.kind = kind
        self.operation = operation
        self.detail = detail
    }

    package static func classify(errno code: Int32) -> Kind {
        switch code {
        case EACCES, EPERM: .permissionDenied
        case EBUSY, EWOULDBLOCK: .busy
        case ENOENT, ENODEV, ENXIO: .missing
        case EIO: .disconnected
        default: .failed
        }
    }
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
        try serialPortCheck(sp_list_ports(&list), "list serial ports")
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

    /// Reads a port libserialport describes (one it enumerated, or found by name to open).
    package init(port: OpaquePointer) {
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

/// Lists serial ports for `locgate ports`.
public enum SerialPortList {
    /// Every port libserialport enumerates, sorted by path.
    public static func list() throws -> [SerialPortInfo] { try SerialPortInfo.list() }

    /// A table of ports: path, transport, vid:pid, manufacturer, product, serial, description.
    public static func table(_ ports: [SerialPortInfo]) -> String {
        let header = ["PATH", "TRANSPORT", "VID:PID", "MANUFACTURER", "PRODUCT", "SERIAL", "DESCRIPTION"]
        var rows = [header]
        for p in ports {
            let ids = p.vendorID.flatMap { v in p.productID.map { "\(hex4(v)):\(hex4($0))" } } ?? "-"
            rows.append([p.path, p.transport.rawValue, ids, p.manufacturer ?? "-", p.product ?? "-",
                         p.serialNumber ?? p.bluetoothAddress ?? "-", p.description.isEmpty ? "-" : p.description])
        }
        var widths = [Int](repeating: 0, count: header.count)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        var out = ""
        for r in rows {
            var line = ""
            for (i, c) in r.enumerated() {
                line += i == r.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count + 2)
            }
            out += line + "\n"
        }
        return out
    }
}

/// A USB id as four hex digits (`1546`).
package func hex4(_ v: Int) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: max(0, 4 - s.count)) + s
}

/// Turns a libserialport result into a count or a classified error.
@discardableResult
package func serialPortCheck(_ result: sp_return, _ operation: @autoclosure () -> String) throws(SerialPortError) -> Int {
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
