import Foundation

/// The request lines a client sends: NTRIP 1 (`HTTP/1.0`, answered `ICY 200 OK`) or NTRIP 2
/// (HTTP/1.1 with `Ntrip-Version: Ntrip/2.0`).
enum NTRIPRequest {
    static let userAgent = "NTRIP locgate/1.0"

    /// `GET /mountpoint` (the sourcetable for an empty one).
    static func bytes(_ c: NTRIPConfiguration, mountpoint: String) -> [UInt8] {
        var lines: [String]
        if c.version == 1 {
            lines = ["GET /\(mountpoint) HTTP/1.0", "User-Agent: \(userAgent)", "Accept: */*"]
        } else {
            let host = c.host.contains(":") ? "[\(c.host)]" : c.host
            lines = ["GET /\(mountpoint) HTTP/1.1", "Host: \(host):\(c.port)", "Ntrip-Version: Ntrip/2.0", "User-Agent: \(userAgent)"]
        }
        if let user = c.user {
            let token = Data("\(user):\(c.password ?? "")".utf8).base64EncodedString()
            lines.append("Authorization: Basic \(token)")
        }
        lines.append("Connection: close")
        return Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }
}
