@testable import ConsoleOutput
import Foundation
import GatewayCore
import GatewayTesting
import Glibc
import Locking
import Testing

/// A pipe standing in for standard output: the sink writes its end, the test reads the other
/// without blocking, so it can look at what was written from inside an acknowledgement.
final class OutputPipe: Sendable {
    let writeEnd: Int32
    private let readEnd: Int32
    private let text = Locked("")

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw StdoutSinkError(message: "pipe: \(errno)") }
        (readEnd, writeEnd) = (fds[0], fds[1])
        for fd in fds {
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Everything written so far.
    func read() -> String {
        text.withLock { text in
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = chunk.withUnsafeMutableBytes { Glibc.read(readEnd, $0.baseAddress, $0.count) }
                guard n > 0 else { break }
                text += String(decoding: chunk[..<n], as: UTF8.self)
            }
            return text
        }
    }

    /// The ids of the complete JSON lines written so far.
    func ids() -> [String] {
        read().split(separator: "\n").compactMap { (try? JSONValue.parse(string: String($0)))?["id"]?.stringValue }
    }

    /// Fills the pipe (64 KiB) until it takes no more: a reader that stopped reading.
    func fill() {
        let junk = [UInt8](repeating: 0x20, count: 4096)
        while junk.withUnsafeBytes({ write(writeEnd, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// The sink contract (``SinkConformance``) for the stdout sink, writing into a pipe.
@Suite(.timeLimit(.minutes(2))) struct StdoutSinkConformanceTests {
    static func make(_ pipe: OutputPipe) -> (ComponentContext) throws -> any PositionSink {
        { context in StdoutSink(configuration: StdoutSinkConfiguration(), context: context, fd: pipe.writeEnd) }
    }

    @Test func everyPositionIsWrittenAndCounted() async throws {
        let pipe = try OutputPipe()
        // 100 lines fit in the pipe (64 KiB) that nobody reads until the sink returned.
        try await SinkConformance.checkDeliversAndCounts(positions(0..<100), make: Self.make(pipe)) { pipe.ids() }
    }

    @Test func aBatchIsAcknowledgedOnlyOnceItIsWritten() async throws {
        let pipe = try OutputPipe()
        try await SinkConformance.checkAcknowledgesOnlyAfterCommit(positions(0..<100), make: Self.make(pipe)) { Set(pipe.ids()) }
    }

    @Test func itStopsWhenCancelledWhileNobodyReads() async throws {
        let pipe = try OutputPipe()
        pipe.fill()
        try await SinkConformance.checkCancellation(positions(0..<10), make: Self.make(pipe))
    }
}
