#if canImport(Glibc)
import Glibc
#endif

/// The `tls` options of a component that connects out over TLS (the `http` sink, the `mqtt` and
/// `nats` connections): a private CA, a client certificate with its key for mutual TLS, and
/// whether the peer's certificate is checked. Declared and read here once, so every such
/// component documents, reads and checks them alike.
public struct ClientTLSOptions: Sendable, Hashable {
    /// PEM file of the CAs that sign the peer's certificate; nil: the system's.
    public var caFile: String?
    /// Client certificate (PEM), for peers that require mutual TLS; with `keyFile`.
    public var certFile: String?
    public var keyFile: String?
    /// false accepts any peer certificate.
    public var verify: Bool

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil, verify: Bool = ClientTLSOptions.verifyOption.defaultValue) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.verify = verify
    }

    public static let verifyOption = Option("tls.verify", default: true,
        "Check the peer's certificate and host name; false accepts any certificate (test benches only).")

    /// The options below `tls`, in the order the READMEs list them; `peer` is what presents the
    /// certificate ("the broker").
    public static func specs(peer: String) -> [OptionSpec] {
        [
            OptionSpec("tls.ca_file", "path", default: "system CAs", "PEM file of the CA(s) that signed \(peer)'s certificate (a private CA)."),
            OptionSpec("tls.cert_file", "path", default: "none", "PEM client certificate (chain) for mutual TLS; with tls.key_file."),
            OptionSpec("tls.key_file", "path", default: "none", "Unencrypted PEM private key of tls.cert_file."),
            verifyOption.spec,
        ]
    }

    /// Reads the members of a `tls` object; the caller adds its own checks and finishes it. With
    /// `checkFiles`, a file that cannot be read is a configuration error now (the broker
    /// connections: their C libraries would only say so when connecting); without, the component
    /// checks ``files`` when it starts and in `locgate validate`.
    public static func read(_ tls: inout OptionReader, checkFiles: Bool) -> ClientTLSOptions {
        func file(_ key: String) -> String? {
            guard let path = tls.filePath(key) else { return nil }
            if checkFiles && access(path, R_OK) != 0 {
                tls.report(key, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            return path
        }
        var t = ClientTLSOptions()
        t.caFile = file("ca_file")
        t.certFile = file("cert_file")
        t.keyFile = file("key_file")
        t.verify = tls.read(verifyOption)
        if t.certFile != nil && t.keyFile == nil { tls.report("key_file", "required with cert_file") }
        if t.keyFile != nil && t.certFile == nil { tls.report("cert_file", "required with key_file") }
        return t
    }

    /// The files given, each with its option (`tls.ca_file`), in the order of the options.
    public var files: [(option: String, path: String)] {
        [("tls.ca_file", caFile), ("tls.cert_file", certFile), ("tls.key_file", keyFile)].compactMap { option, path in
            path.map { (option, $0) }
        }
    }
}

/// The `tls` options of a component that serves HTTPS (the operator API, the `http_server`
/// source): its certificate and key, both required once `tls` is given.
public struct ServerTLSOptions: Sendable, Hashable {
    public var certFile: String
    public var keyFile: String

    public init(certFile: String, keyFile: String) {
        self.certFile = certFile
        self.keyFile = keyFile
    }

    /// The options below `tls`, in the order the documentation lists them.
    public static let specs: [OptionSpec] = [
        OptionSpec("tls.cert_file", "path", default: "required with tls", "PEM certificate (chain) to serve HTTPS with."),
        OptionSpec("tls.key_file", "path", default: "required with tls", "Unencrypted PEM private key of tls.cert_file."),
    ]

    /// Reads the members of a `tls` object; nil when one is missing (reported). The caller
    /// finishes the object.
    public static func read(_ tls: inout OptionReader) -> ServerTLSOptions? {
        let cert = tls.filePath("cert_file")
        let key = tls.filePath("key_file")
        if cert == nil { tls.report("cert_file", "required option is missing") }
        if key == nil { tls.report("key_file", "required option is missing") }
        guard let cert, let key else { return nil }
        return ServerTLSOptions(certFile: cert, keyFile: key)
    }

    /// The files, each with its option (`tls.cert_file`).
    public var files: [(option: String, path: String)] { [("tls.cert_file", certFile), ("tls.key_file", keyFile)] }
}
