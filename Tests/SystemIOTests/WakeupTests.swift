import Dispatch
import Locking
import SystemIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A pipe for a test to write to and wait on; closed in deinit.
private final class TestPipe: Sendable {
    let readFD: Int32
    private let writeEnd: Locked<Int32>
    var writeFD: Int32 { writeEnd.withLock { $0 } }

    init() throws {
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        readFD = fds[0]
        writeEnd = Locked(fds[1])
    }

    deinit {
        close(readFD)
        closeWriteEnd()
    }

    /// The reader then sees end of file (a hang-up).
    func closeWriteEnd() {
        writeEnd.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    func write() {
        var b: UInt8 = 1
        _ = Glibc.write(writeFD, &b, 1)
    }
}

@Suite(.timeLimit(.minutes(1))) struct WakeupTests {
    @Test func returnsTheReadyDescriptor() async throws {
        let wakeup = try Wakeup()
        let p = try TestPipe()
        p.write()
        #expect(await wakeup.wait([p.readFD], timeout: .seconds(20)) == [p.readFD])
    }

    @Test func returnsNothingOnTimeout() async throws {
        let wakeup = try Wakeup()
        let p = try TestPipe()
        #expect(await wakeup.wait([p.readFD], timeout: .milliseconds(20)).isEmpty)
    }

    @Test func waitsForWritableWithPOLLOUT() async throws {
        let wakeup = try Wakeup()
        let p = try TestPipe()
        #expect(await wakeup.wait([p.writeFD], events: Int16(POLLOUT), timeout: .seconds(20)) == [p.writeFD])
    }

    @Test func readinessTellsAHangUpFromData() async throws {
        let wakeup = try Wakeup()
        let p = try TestPipe()
        p.write()
        let data = await wakeup.readiness([p.readFD], timeout: .seconds(20))
        #expect(data.map(\.fd) == [p.readFD])
        #expect(data.first?.isReadable == true && data.first?.isHungUp == false)
        p.closeWriteEnd()
        let hungUp = await wakeup.readiness([p.readFD], timeout: .seconds(20))
        #expect(hungUp.first?.isHungUp == true)
    }

    /// A wait with a timeout far longer than the test's polling bound ends once its task is cancelled.
    @Test func cancellationEndsAPendingWait() async throws {
        let wakeup = try Wakeup()
        let p = try TestPipe()
        let result = Locked<[Int32]?>(nil)
        let task = Task {
            let ready = await wakeup.wait([p.readFD], timeout: .seconds(3600))
            result.withLock { $0 = ready }
        }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        await task.value
        #expect(result.withLock { $0 } == [])
        // The fired pipe stays readable: later waits of a cancelled source return at once too.
        #expect(await wakeup.wait([p.readFD], timeout: .seconds(3600)) == [])
    }
}
