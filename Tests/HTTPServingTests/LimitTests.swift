import GatewayTesting
import HTTPServing
import Synchronization
import Testing

/// What a client may take: connections in all and per address, time to send a request, body size.
@Suite(.timeLimit(.minutes(1)))
struct LimitTests {
    /// Answers with the body's length and the client's address.
    let echo: HTTPServer.Handler = { request, responder in
        responder.respond(ok("\(request.body.count) \(request.peerAddress)"))
    }

    @Test func aDeclaredBodyOverTheLimitIs413BeforeItIsSent() async throws {
        try await withServer(limits: HTTPServer.Limits(maximumBodySize: 1000), echo) { server in
            let fits = try exchange(server.port, "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n"
                                    + String(repeating: "a", count: 1000))
            #expect(fits?.text == "1000 127.0.0.1", "a body of exactly the limit is read")
            // Only the headers are sent: the answer cannot be waiting for the body.
            let c = try RawConnection(port: server.port)
            c.send("POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000\r\n\r\n")
            let r = c.response()
            #expect(r?.status == 413)
            #expect(r?.text == "request body too large: at most 1000 bytes\n")
            #expect(c.closes(within: .seconds(5)), "the rest of the request is not read")
            #expect(server.statistics.tooLarge == 1)
        }
    }

    @Test func aChunkedBodyIsCutOffWhenItPassesTheLimit() async throws {
        let handled = Atomic<Int>(0)
        try await withServer(limits: HTTPServer.Limits(maximumBodySize: 1000), { request, responder in
            handled.add(1, ordering: .relaxed)
            responder.respond(ok("\(request.body.count)"))
        }) { server in
            let c = try RawConnection(port: server.port)
            c.send("POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
            let chunk = "258\r\n" + String(repeating: "b", count: 600) + "\r\n"
            c.send(chunk)
            c.send(chunk)
            #expect(c.closes(within: .seconds(5)))
            #expect(RawResponse(c.read(timeout: .zero))?.status != 200)
            #expect(handled.load(ordering: .relaxed) == 0, "the handler never sees it")
            #expect(server.statistics.tooLarge == 1)
            let small = try exchange(server.port, "POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunk + "0\r\n\r\n")
            #expect(small?.text == "600")
        }
    }

    @Test func connectionsBeyondTheTotalLimitAreRefusedAndCounted() async throws {
        try await withServer(limits: HTTPServer.Limits(connections: 5), echo) { server in
            var held = try (0..<5).map { _ in try RawConnection(port: server.port) }
            #expect(await Poll.until { server.statistics.open == 5 })
            let sixth = try RawConnection(port: server.port)
            #expect(sixth.closes(within: .seconds(5)), "closed at accept")
            #expect(server.statistics.refusedLimit == 1)
            #expect(server.statistics.open == 5)
            // A place freed is a place taken.
            held.removeLast().hangUp()
            #expect(await Poll.until { server.statistics.open == 4 })
            #expect(try exchange(server.port, get("/"))?.status == 200)
            #expect(server.statistics.refusedLimit == 1)
            _ = held
        }
    }

    @Test func connectionsBeyondThePerAddressLimitAreRefusedAndCounted() async throws {
        try await withServer(limits: HTTPServer.Limits(connections: 100, connectionsPerAddress: 3), echo) { server in
            let held = try (0..<3).map { _ in try RawConnection(port: server.port) }
            #expect(await Poll.until { server.statistics.open == 3 })
            let fourth = try RawConnection(port: server.port)
            #expect(fourth.closes(within: .seconds(5)), "closed at accept")
            #expect(server.statistics.refusedPerAddress == 1)
            #expect(server.statistics.refusedLimit == 0)
            // Another address (the whole of 127/8 is this machine) has its own count.
            let other = try RawConnection(port: server.port, from: "127.0.0.2")
            other.send(get("/"))
            #expect(other.response()?.text == "0 127.0.0.2")
            #expect(server.statistics.refusedPerAddress == 1)
            _ = held
        }
    }

    @Test func aClientTricklingItsHeadersIsCutOffAtTheDeadline() async throws {
        let limits = HTTPServer.Limits(idleTimeout: .seconds(10), requestDeadline: .seconds(1))
        try await withServer(limits: limits, echo) { server in
            let slow = try RawConnection(port: server.port)
            slow.send("GET / HTTP/1.1\r\nHost: test\r\nX-Trickle: ")
            // One byte every 200 ms: well within the idle timeout, far beyond the deadline.
            var trickled = 0
            while trickled < 50 && !slow.closes(within: .milliseconds(200)) {
                slow.send("a")
                trickled += 1
            }
            #expect(slow.closedByPeer, "still open after \(trickled) bytes")
            #expect(trickled >= 3, "cut off before its deadline, after \(trickled) bytes")
            #expect(server.statistics.deadlineClosed == 1)
            // A prompt client is served, and a connection kept alive across answered requests is not cut.
            let prompt = try RawConnection(port: server.port)
            prompt.send(get("/", keepAlive: true))
            #expect(prompt.response()?.status == 200)
            #expect(server.statistics.deadlineClosed == 1)
        }
    }

    @Test func silentConnectionsAreCutOffAtTheDeadlineToo() async throws {
        try await withServer(limits: HTTPServer.Limits(idleTimeout: .seconds(10), requestDeadline: .milliseconds(500)), echo) { server in
            let silent = try (0..<3).map { _ in try RawConnection(port: server.port) }
            for c in silent { #expect(c.closes(within: .seconds(5))) }
            #expect(server.statistics.deadlineClosed == 3)
            #expect(await Poll.until { server.statistics.open == 0 })
        }
    }
}
