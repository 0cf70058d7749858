import GatewayTesting
import Locking
import Synchronization
import SystemIO
import Testing

/// Echoes what a connection receives, optionally closing after a first answer.
private final class Echo: TCPConnectionDelegate, @unchecked Sendable {
    // Loop thread only.
    var connections: [TCPConnection] = []
    let ended = Atomic<Int>(0)
    let closed = Atomic<Int>(0)
    var closeAfterFirst = false
    var answer: (([UInt8]) -> [UInt8])?

    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) {
        let reply = answer?(Array(bytes)) ?? Array(bytes)
        connection.write(reply)
        if closeAfterFirst { connection.close(afterWrites: true) }
    }
    func connectionEnded(_ connection: TCPConnection, error: SystemError?) { ended.add(1, ordering: .relaxed) }
    func connectionClosed(_ connection: TCPConnection) {
        closed.add(1, ordering: .relaxed)
        connections.removeAll { $0 === connection }
    }
    func connectionWritable(_ connection: TCPConnection) {}
}

@Suite(.timeLimit(.minutes(1))) struct EventLoopTests {
    @Test func echoesOverTCPAndSeesThePeerClose() async throws {
        let loop = try EventLoop(name: "test-io")
        defer { loop.stop() }
        let echo = Echo()
        let listener = try await loop.perform {
            try loop.listenTCP(host: "127.0.0.1", port: 0) { c in
                echo.connections.append(c)
                c.delegate = echo
                c.startReading()
            }
        }
        let port = listener.address.port
        #expect(port > 0)
        let client = try LoopbackTCPClient(port: port)
        client.send("hello")
        #expect(client.read(count: 5) == Array("hello".utf8))
        client.close()
        #expect(await Poll.until { echo.closed.load(ordering: .relaxed) == 1 })
        #expect(echo.ended.load(ordering: .relaxed) == 1)
    }

    @Test func closesAfterItsWritesWereSent() async throws {
        let loop = try EventLoop(name: "test-io")
        defer { loop.stop() }
        let echo = Echo()
        echo.closeAfterFirst = true
        // A megabyte answer cannot go out in one write: the close must wait for all of it.
        echo.answer = { _ in [UInt8](repeating: 0x5a, count: 1 << 20) }
        let listener = try await loop.perform {
            try loop.listenTCP(host: "127.0.0.1", port: 0) { c in
                echo.connections.append(c)
                c.delegate = echo
                c.startReading()
            }
        }
        let client = try LoopbackTCPClient(port: listener.address.port)
        client.send("x")
        let got = client.read(count: 1 << 20)
        #expect(got.count == 1 << 20)
        #expect(got.allSatisfy { $0 == 0x5a })
        #expect(client.waitForClose())
    }

    @Test func answersDatagramsToTheirSenders() async throws {
        let loop = try EventLoop(name: "test-io")
        defer { loop.stop() }
        let box = Locked<UDPEndpoint?>(nil)
        let endpoint = try await loop.perform {
            try loop.bindUDP(host: "127.0.0.1", port: 0) { bytes, sender, truncated in
                box.withLock { $0 }?.send(truncated ? [] : Array(bytes.reversed()), to: sender)
            }
        }
        box.withLock { $0 = endpoint }
        let a = try LoopbackUDPSender(), b = try LoopbackUDPSender()
        a.send([1, 2, 3], to: endpoint.address.port)
        b.send([7, 8], to: endpoint.address.port)
        #expect(a.receive() == [3, 2, 1])
        #expect(b.receive() == [8, 7])
    }

    @Test func stopClosesEverySocketAndEndsTheThread() async throws {
        let loop = try EventLoop(name: "test-io")
        let echo = Echo()
        let listener = try await loop.perform {
            try loop.listenTCP(host: "127.0.0.1", port: 0) { c in
                echo.connections.append(c)
                c.delegate = echo
                c.startReading()
            }
        }
        let port = listener.address.port
        let client = try LoopbackTCPClient(port: port)
        client.send("a")
        #expect(client.read(count: 1) == Array("a".utf8))
        loop.stop()
        #expect(client.waitForClose())
        #expect(throws: (any Error).self) { try LoopbackTCPClient(port: port) }
        #expect(echo.closed.load(ordering: .relaxed) == 1)
    }

    @Test func runsJobsFromManyThreadsEachOnceInOrderPerThread() async throws {
        let loop = try EventLoop(name: "test-io")
        defer { loop.stop() }
        final class Seen: Sendable {
            let jobs = Locked<[Int: [Int]]>([:])
            let offLoop = Atomic<Int>(0)
        }
        let seen = Seen()
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<8 {
                group.addTask {
                    for n in 0..<500 {
                        loop.execute {
                            if !loop.inLoop { seen.offLoop.add(1, ordering: .relaxed) }
                            seen.jobs.withLock { $0[sender, default: []].append(n) }
                        }
                    }
                }
            }
        }
        #expect(await Poll.until { seen.jobs.withLock { $0.values.reduce(0) { $0 + $1.count } } == 4_000 })
        #expect(seen.jobs.withLock { $0.values.allSatisfy { $0 == Array(0..<500) } })
        #expect(seen.offLoop.load(ordering: .relaxed) == 0)
        #expect(!loop.inLoop)
    }

    @Test func refusesANameThatIsNotAnAddress() async throws {
        let loop = try EventLoop(name: "test-io")
        defer { loop.stop() }
        await #expect(throws: SystemError.self) { () async throws in
            _ = try await loop.perform { try loop.listenTCP(host: "example.org", port: 0) { $0.close() } }
        }
    }
}
