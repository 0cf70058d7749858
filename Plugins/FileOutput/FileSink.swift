import GatewayCore
import PositionEncoding
#if canImport(Glibc)
import Glibc
#endif

/// Configuration of the `file` sink.
public struct FileSinkConfiguration: Sendable {
    public var path: String = ""
    public var format: PositionFormat = .jsonl
    /// Continue an existing file (`append`) or start it empty (`truncate`).
    public var truncate = FileSinkPlugin.mode.defaultValue == "truncate"
    /// Rotate when the file would grow past this many bytes (0 = never).
    public var rotateBytes = FileSinkPlugin.rotateBytes.defaultValue
    /// Rotated files kept (`path.1` … `path.N`).
    public var keepFiles = FileSinkPlugin.keepFiles.defaultValue
    /// fsync after every batch.
    public var fsync = FileSinkPlugin.fsync.defaultValue
}

/// Writes positions to a file as JSON Lines, CSV, GeoJSON or GPX.
///
/// After every batch the file is a complete document: GeoJSON and GPX trailers are written after
/// each batch and overwritten by the next one, so a crash leaves a valid file.
public struct FileSink: PositionSink {
    let configuration: FileSinkConfiguration
    let context: ComponentContext

    public init(configuration: FileSinkConfiguration, context: ComponentContext) {
        self.configuration = configuration
        self.context = context
    }

    public func run(input: any SinkInput) async throws {
        var file = try DocumentFile(configuration: configuration, logger: context.logger, clock: context.clock)
        defer { file.close() }
        var bytes: [UInt8] = []
        let format = configuration.format
        var textCache = PositionJSON.TextCache()
        while let batch = await input.next() {
            bytes.removeAll(keepingCapacity: true)
            // Typical records are 200-300 bytes: one allocation per batch instead of regrowing.
            bytes.reserveCapacity(batch.count * 320)
            format.appendRecords(batch, to: &bytes, cache: &textCache, afterRecord: file.hasRecords)
            try file.append(bytes)
            input.acknowledge()
            context.stats.addEmitted(batch.count)
            context.stats.set("file.bytes", file.dataEnd)
        }
    }
}

/// Errors with the path and the system's reason.
public struct FileSinkError: Error, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message)" }

    static func system(_ path: String, _ what: String) -> FileSinkError {
        FileSinkError(path: path, message: "\(what): \(String(cString: strerror(errno)))")
    }
}

/// An open output file that always ends with the format's trailer.
struct DocumentFile {
    let configuration: FileSinkConfiguration
    let logger: Logger
    /// Names a file moved aside.
    let clock: any GatewayClock
    var fd: Int32 = -1
    /// Offset where the trailer starts (the next record goes here).
    var dataEnd = 0
    /// Whether a record precedes `dataEnd` (the next one then needs the format's separator).
    var hasRecords: Bool { dataEnd > header.count }
    private var header: [UInt8] { Array(configuration.format.header.utf8) }
    private var trailer: [UInt8] { Array(configuration.format.trailer.utf8) }

    init(configuration: FileSinkConfiguration, logger: Logger, clock: any GatewayClock) throws {
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        try open(truncate: configuration.truncate)
    }

    private mutating func open(truncate: Bool) throws {
        let path = configuration.path
        // Owner-only whatever the umask: positions are personal data. An existing file keeps its mode.
        fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0o600)
        guard fd >= 0 else { throw FileSinkError.system(path, "cannot open for writing") }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSinkError.system(path, "cannot stat") }
        let size = Int(st.st_size)
        if size == 0 {
            try write(header + trailer, at: 0)
            dataEnd = header.count
            return
        }
        // Continue an existing document: it must end with our trailer (and start with our header).
        var tail = [UInt8](repeating: 0, count: trailer.count)
        var head = [UInt8](repeating: 0, count: header.count)
        let tailOK = trailer.isEmpty || (size >= trailer.count && pread(fd, &tail, tail.count, off_t(size - trailer.count)) == tail.count && tail == trailer)
        let headOK = header.isEmpty || (pread(fd, &head, head.count, 0) == head.count && head == header)
        if tailOK && headOK {
            dataEnd = size - trailer.count
            // JSON Lines and CSV have no trailer to prove the file complete: a last line cut short
            // (a crash, a full disk) is ended here, so it stays one broken line a reader skips
            // instead of swallowing the first new record.
            var last: UInt8 = 10
            if trailer.isEmpty, dataEnd > header.count, pread(fd, &last, 1, off_t(dataEnd - 1)) == 1, last != 10 {
                try write([10], at: dataEnd)
                dataEnd += 1
                logger.warning("\(path) ended in the middle of a line; ended it before appending")
            }
            return
        }
        // Not a complete document of this format (another format, or cut short elsewhere):
        // keep it aside rather than corrupt it, and start a new one.
        Glibc.close(fd)
        fd = -1
        let aside = "\(path).incomplete-\(clock.now().milliseconds)"
        guard rename(path, aside) == 0 else { throw FileSinkError.system(path, "cannot move an incomplete \(configuration.format.rawValue) file aside") }
        logger.warning("\(path) is not a complete \(configuration.format.rawValue) document; moved it to \(aside) and started a new one")
        try open(truncate: true)
    }

    private func write(_ bytes: [UInt8], at offset: Int) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { buf in pwrite(fd, buf.baseAddress! + done, buf.count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSinkError.system(configuration.path, "write failed")
            }
            done += n
        }
    }

    /// Appends records (already separated) and rewrites the trailer after them.
    mutating func append(_ recordBytes: [UInt8]) throws {
        guard !recordBytes.isEmpty else { return }
        if configuration.rotateBytes > 0, dataEnd + recordBytes.count + trailer.count > configuration.rotateBytes, dataEnd > header.count {
            try rotate()
            var fresh = recordBytes
            // The first record of a new file takes no separator.
            let sep = Array(configuration.format.separator.utf8)
            if !sep.isEmpty, fresh.starts(with: sep) { fresh.removeFirst(sep.count) }
            try write(fresh + trailer, at: dataEnd)
            dataEnd += fresh.count
        } else if trailer.isEmpty {
            // JSON Lines and CSV: no trailer, so no concatenated copy of the batch.
            try write(recordBytes, at: dataEnd)
            dataEnd += recordBytes.count
        } else {
            try write(recordBytes + trailer, at: dataEnd)
            dataEnd += recordBytes.count
        }
        if configuration.fsync, Glibc.fsync(fd) != 0 { throw FileSinkError.system(configuration.path, "fsync failed") }
    }

    private mutating func rotate() throws {
        Glibc.close(fd)
        fd = -1
        let path = configuration.path
        if configuration.keepFiles > 0 {
            unlink("\(path).\(configuration.keepFiles)")
            var i = configuration.keepFiles - 1
            while i >= 1 {
                rename("\(path).\(i)", "\(path).\(i + 1)")
                i -= 1
            }
            guard rename(path, "\(path).1") == 0 else { throw FileSinkError.system(path, "cannot rotate") }
        } else {
            unlink(path)
        }
        logger.info("rotated \(path) at \(dataEnd) bytes")
        try open(truncate: true)
    }

    mutating func close() {
        if fd >= 0 {
            // Without `fsync` the file is left to the page cache like any other file a program
            // writes (a clean shutdown or reboot writes it out); syncing only at the end would
            // make every run wait for, and spend CPU on, writing the whole file back, and still
            // not protect what a power cut mid-run takes.
            if configuration.fsync { Glibc.fsync(fd) }
            Glibc.close(fd)
            fd = -1
        }
    }
}
