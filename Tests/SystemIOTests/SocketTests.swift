import Foundation
import GatewayTesting
import Locking
import SystemIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on loopback for a test to connect to; accepts only when asked. Closed in deinit.
private final class TestListener: @unchecked Sendable {
    // @unchecked: the fd never changes; accept is called by one test at a time.
    let fd: Int32
    let port: Int

    /// Listens on `127.0.0.1` or `::1` on a free port, with `backlog` (0: one pending connection).
    init(ipv6: Bool = false, backlog: Int32 = 16) throws {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        var rc: Int32
        if ipv6 {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_addr = in6addr_loopback
            rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        if rc == 0 { rc = listen(fd, backlog) }
        guard rc == 0, let port = TestListener.port(of: fd) else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ListenerError(description: "listen on \(ipv6 ? "[::1]" : "127.0.0.1"): \(reason)")
        }
        self.fd = fd
        self.port = port
    }

    deinit { close(fd) }

    /// The next connection (blocking; call it once the client has connected).
    func accept() throws -> Int32 {
        let c = Glibc.accept(fd, nil, nil)
        try #require(c >= 0, "accept: \(String(cString: strerror(errno)))")
        return c
    }

    static func port(of fd: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard rc == 0 else { return nil }
        // sin_port and sin6_port sit at the same offset, right after the family.
        return withUnsafeBytes(of: &storage) { Int(UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self))) }
    }
}

private struct ListenerError: Error, CustomStringConvertible {
    var description: String
}

/// A port on 127.0.0.1 that nobody listens on: bound, then released.
private func closedPort() throws -> Int {
    let listener = try TestListener()
    return listener.port
}

/// Whether this machine has an IPv6 loopback (a container may not).
private let hasIPv6Loopback: Bool = (try? TestListener(ipv6: true)) != nil

@Suite(.timeLimit(.minutes(1))) struct SocketTests {
    @Test func connectingToAPortNobodyListensOnFailsWithTheErrnoText() async throws {
        let port = try closedPort()
        let wakeup = try Wakeup()
        let error = await #expect(throws: SystemError.self) {
            _ = try await Socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(20), wakeup: wakeup)
        }
        #expect(error?.description == "connect 127.0.0.1:\(port): Connection refused")
        #expect(error?.code == ECONNREFUSED)
    }

    /// A listener whose accept queue is full drops new SYNs, so the connect stays pending and
    /// only the per-address timeout ends it.
    @Test func aConnectThatGetsNoAnswerTimesOut() async throws {
        let listener = try TestListener(backlog: 0)
        let wakeup = try Wakeup()
        // Fills the queue: it holds backlog + 1 connections that were never accepted.
        let queued = try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(20), wakeup: wakeup)
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: SystemError.self) {
            _ = try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .milliseconds(300), wakeup: wakeup)
        }
        let elapsed = clock.now - start
        #expect(error?.code == ETIMEDOUT)
        #expect(error?.description.hasPrefix("connect 127.0.0.1:\(listener.port): timed out after") == true, "\(String(describing: error))")
        #expect(elapsed >= .milliseconds(300))
        withExtendedLifetime(queued) {}
    }

    @Test func aBlockingConnectReportsLikeTheAsyncOne() throws {
        let listener = try TestListener(backlog: 0)
        let socket = try Socket.connectBlocking(host: "127.0.0.1", port: listener.port, timeout: .seconds(20))
        #expect(socket.peerAddress == "127.0.0.1:\(listener.port)")
        // The accept queue is now full: the next connect gets no answer and times out.
        let timedOut = #expect(throws: SystemError.self) {
            _ = try Socket.connectBlocking(host: "127.0.0.1", port: listener.port, timeout: .milliseconds(300))
        }
        #expect(timedOut?.code == ETIMEDOUT)
        let port = try closedPort()
        let refused = #expect(throws: SystemError.self) {
            _ = try Socket.connectBlocking(host: "127.0.0.1", port: port, timeout: .seconds(20))
        }
        #expect(refused?.description == "connect 127.0.0.1:\(port): Connection refused")
    }

    @Test func cancellingAPendingConnectReturnsPromptly() async throws {
        let listener = try TestListener(backlog: 0)
        let wakeup = try Wakeup()
        let queued = try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(20), wakeup: wakeup)
        let task = Task {
            try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(3600), wakeup: Wakeup())
        }
        // The kernel shows the connect pending (its SYN unanswered): the task is in its wait.
        #expect(await Poll.until(timeout: .seconds(30)) { synSent(toPort: listener.port) })
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        let result = await task.result
        let elapsed = clock.now - start
        #expect(throws: CancellationError.self) { try result.get() }
        // Loose for a loaded machine: without the wakeup this would wait out the hour.
        #expect(elapsed < .seconds(1), "took \(elapsed)")
        withExtendedLifetime(queued) {}
    }

    @Test func readWaitsForDataAndReportsTheEnd() async throws {
        let listener = try TestListener()
        let wakeup = try Wakeup()
        let client = try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(20), wakeup: wakeup)
        let server = try listener.accept()
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try await client.read(into: &buffer, timeout: .milliseconds(20), wakeup: wakeup) == .nothing)
        _ = "hello".withCString { Glibc.send(server, $0, 5, Int32(MSG_NOSIGNAL)) }
        #expect(try await client.read(into: &buffer, timeout: .seconds(20), wakeup: wakeup) == .bytes(5))
        #expect(Array(buffer[0..<5]) == Array("hello".utf8))
        close(server)
        #expect(try await client.read(into: &buffer, timeout: .seconds(20), wakeup: wakeup) == .end)
    }

    /// The peer reads in small bites with pauses, so the socket buffer fills and `sendAll` has to
    /// wait for room many times; every byte arrives, in order.
    @Test func sendAllDeliversEverythingToASlowReader() async throws {
        let listener = try TestListener()
        let wakeup = try Wakeup()
        let client = try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(20), wakeup: wakeup)
        let server = try listener.accept()
        // The shutdown ends the reader's recv, also when the test fails early.
        defer { shutdown(server, Int32(SHUT_RDWR)); close(server) }
        let payload = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) }
        // A small send buffer fills at once, whatever the reader's pace: the sender waits for
        // room over and over.
        var small: Int32 = 16 * 1024
        #expect(setsockopt(client.fd, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size)) == 0)
        let received = Locked<[UInt8]>([])
        let reader = Thread {
            var chunk = [UInt8](repeating: 0, count: 4 * 1024)
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, 0) }
                if n <= 0 { return }
                received.withLock { $0 += chunk[0..<n] }
            }
        }
        reader.start()
        try await client.sendAll(payload, timeout: .seconds(30), wakeup: wakeup)
        #expect(await Poll.until(timeout: .seconds(30)) { received.withLock { $0.count } >= payload.count })
        // Compared outside #expect, which would print both 8 MiB arrays on a mismatch.
        let intact = received.withLock { $0 == payload }
        #expect(intact, "the bytes received differ from the bytes sent")
    }

    @Test func sendAllGivesUpWhenThePeerStopsReading() async throws {
        let listener = try TestListener()
        let wakeup = try Wakeup()
        let client = try await Socket.connect(host: "127.0.0.1", port: listener.port, timeout: .seconds(20), wakeup: wakeup)
        let server = try listener.accept()
        defer { close(server) }
        // Far more than loopback's socket buffers hold.
        let payload = [UInt8](repeating: 7, count: 64 << 20)
        let error = await #expect(throws: SystemError.self) {
            try await client.sendAll(payload, timeout: .milliseconds(300), wakeup: wakeup)
        }
        #expect(error?.code == ETIMEDOUT)
        #expect(error?.operation.hasPrefix("send (") == true, "\(String(describing: error))")
    }

    @Test func aDatagramNamesItsSender() async throws {
        let wakeup = try Wakeup()
        let receiver = try await Socket.bindUDP(host: "127.0.0.1", port: 0)
        let sender = try await Socket.bindUDP(host: "127.0.0.1", port: 0)
        let port = try #require(receiver.localPort)
        let senderPort = try #require(sender.localPort)
        #expect(receiver.localAddress == "127.0.0.1:\(port)")
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try receiver.receive(into: &buffer) == nil)
        try send("$GPGGA\r\n", from: sender, to: port)
        #expect(await wakeup.wait([receiver.fd], timeout: .seconds(20)) == [receiver.fd])
        let got = try #require(try receiver.receive(into: &buffer))
        #expect(got.count == 8)
        #expect(got.sender == "127.0.0.1:\(senderPort)")
        #expect(Array(buffer[0..<8]) == Array("$GPGGA\r\n".utf8))
    }

    @Test func bindingAPortInUseFailsWithTheErrnoText() async throws {
        // Held without SO_REUSEADDR, so no second socket may bind it.
        let holder = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(holder) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(rc == 0)
        let port = try #require(TestListener.port(of: holder))
        let error = await #expect(throws: SystemError.self) {
            _ = try await Socket.bindUDP(host: "127.0.0.1", port: port)
        }
        #expect(error?.description == "bind 127.0.0.1:\(port): Address already in use")
        #expect(error?.code == EADDRINUSE)
    }

    /// Two udp sources (two locgate processes) on one port: the second must fail, not share the
    /// datagrams (which SO_REUSEADDR on both sockets would allow).
    @Test func aSecondUDPBindToThePortFails() async throws {
        let first = try await Socket.bindUDP(host: "127.0.0.1", port: 0)
        let port = try #require(first.localPort)
        let error = await #expect(throws: SystemError.self) {
            _ = try await Socket.bindUDP(host: "127.0.0.1", port: port)
        }
        #expect(error?.code == EADDRINUSE)
        #expect(error?.description == "bind 127.0.0.1:\(port): Address already in use")
    }

    @Test(.enabled(if: hasIPv6Loopback)) func ipv6LoopbackConnectsAndIsWrittenInBrackets() async throws {
        let listener = try TestListener(ipv6: true)
        let wakeup = try Wakeup()
        let client = try await Socket.connect(host: "::1", port: listener.port, timeout: .seconds(20), wakeup: wakeup)
        let server = try listener.accept()
        defer { close(server) }
        #expect(client.peerAddress == "[::1]:\(listener.port)")
        try await client.sendAll(Array("?WATCH\n".utf8), timeout: .seconds(20), wakeup: wakeup)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(recv(server, &buffer, buffer.count, 0) == 7)

        let closed = try TestListener(ipv6: true).port
        let error = await #expect(throws: SystemError.self) {
            _ = try await Socket.connect(host: "::1", port: closed, timeout: .seconds(20), wakeup: wakeup)
        }
        #expect(error?.description == "connect [::1]:\(closed): Connection refused")
    }

    /// Sends one datagram from `socket` to 127.0.0.1:`port`.
    private func send(_ text: String, from socket: Socket, to port: Int) throws {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        let bytes = Array(text.utf8)
        let n = withUnsafePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(socket.fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(n == bytes.count)
    }
}

/// Whether a TCP connect to 127.0.0.1:`port` is pending (state SYN_SENT in /proc/net/tcp).
private func synSent(toPort port: Int) -> Bool {
    // Read to the end: /proc files report size 0, and a busy machine's table is many pages long.
    guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return false }
    defer { try? file.close() }
    guard let data = try? file.readToEnd() else { return false }
    let table = String(decoding: data, as: UTF8.self)
    let hex = String(port, radix: 16, uppercase: true)
    let remote = "0100007F:" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    return table.split(separator: "\n").dropFirst().contains { line in
        let fields = line.split(separator: " ")
        return fields.count > 3 && fields[2] == remote && fields[3] == "02"
    }
}
