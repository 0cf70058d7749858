import GatewayCore
import NMEA
#if canImport(Glibc)
import Glibc
#endif

/// Why following the file stopped for now; the source reopens it after a backoff.
struct TailError: Error, CustomStringConvertible {
    var description: String

    static func errno(_ operation: String, _ path: String) -> TailError {
        TailError(description: "\(operation) \(path): \(String(cString: strerror(Glibc.errno)))")
    }
}

/// Follows one file: reads what is appended, reopens it when it is replaced or truncated.
struct LineTailSource: PositionSource {
    let configuration: LineTailConfiguration
    let context: ComponentContext

    func run(output: SourceOutput) async throws {
        var backoff = Backoff(initial: configuration.reopenInitial, cap: configuration.reopenMax)
        var firstOpen = true
        var totals = NMEAStatistics()
        while true {
            try Task.checkCancellation()
            do {
                let delivered = try await follow(output, fromStart: configuration.fromStart || !firstOpen, totals: &totals)
                firstOpen = false
                if delivered { backoff.reset() }
                context.stats.count("line_tail.reopens")
                context.logger.info("\(configuration.path) was replaced or truncated; reopening")
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                context.stats.count("line_tail.open_failures")
                context.logger.warning("\(error)")
            }
            try await context.clock.sleep(for: backoff.next())
        }
    }

    /// Reads appended bytes until the file is replaced or truncated (returns whether it delivered
    /// positions) or cannot be read (throws).
    private func follow(_ output: SourceOutput, fromStart: Bool, totals: inout NMEAStatistics) async throws -> Bool {
        let path = configuration.path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TailError.errno("open", path) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw TailError.errno("fstat", path) }
        let inode = st.st_ino
        var offset = fromStart ? 0 : Int64(st.st_size)
        guard lseek(fd, off_t(offset), SEEK_SET) >= 0 else { throw TailError.errno("lseek", path) }

        var options = NMEAOptions()
        options.source = context.id
        options.device = configuration.device
        options.idPrefix = "\(context.id)-"
        var decoder = NMEADecoder(options: options)
        let base = totals
        defer { totals = base.adding(decoder.statistics) }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var delivered = false
        var idle: Duration = .zero
        while true {
            try Task.checkCancellation()
            // A regular file never blocks a read for long, so it is read inline like FileReplay does.
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { throw TailError.errno("read", path) }
            var positions: [Position] = []
            if n > 0 {
                offset += Int64(n)
                idle = .zero
                buffer.withUnsafeBytes { decoder.decode(UnsafeRawBufferPointer(rebasing: $0[0..<n]), into: &positions) }
            } else {
                // At the end: a sentence without its line end is complete once the writer paused.
                idle += configuration.pollInterval
                if idle >= .seconds(1) { decoder.flush(into: &positions) }
            }
            base.adding(decoder.statistics).publish(to: context.stats)
            if !positions.isEmpty {
                delivered = true
                await output.emit(positions)
            }
            if n > 0 { continue }
            // Replaced (a new inode at the path) or truncated: start over with the new content.
            var now = stat()
            if stat(path, &now) != 0 || now.st_ino != inode || Int64(now.st_size) < offset {
                decoder.flush(into: &positions)
                await output.emit(positions)
                return delivered
            }
            try await context.clock.sleep(for: configuration.pollInterval)
        }
    }
}
