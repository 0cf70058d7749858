import Dispatch
import GatewayTesting
import HTTPServing
import Locking
import Testing

/// Requests answered at once, later from another thread, twice, never, or after the client left.
@Suite(.timeLimit(.minutes(1)))
struct AnsweringTests {
    @Test func theHandlerSeesTheWholeRequestAndItsAnswerIsSent() async throws {
        let seen = Locked<HTTPRequest?>(nil)
        try await withServer({ request, responder in
            seen.withLock { $0 = request }
            responder.respond(HTTPResponse(status: 201, headers: [("X-Echo", request.headers["x-mixed-case"] ?? "")], body: request.body))
        }) { server in
            let c = try RawConnection(port: server.port)
            c.send("POST /positions?device=phone%201&x=1 HTTP/1.1\r\nHost: test\r\nX-Mixed-Case: Yes\r\nCookie: a=1; b=two\r\n"
                   + "Content-Length: 5\r\nConnection: close\r\n\r\nhello")
            let r = try #require(c.response())
            #expect(r.status == 201)
            #expect(r.headers["x-echo"] == "Yes")
            #expect(r.text == "hello")
            let request = try #require(seen.withLock { $0 })
            #expect(request.method == "POST")
            #expect(request.path == "/positions")
            #expect(request.query == ["device": "phone 1", "x": "1"])
            #expect(request.headers["host"] == "test")
            #expect(request.headers["x-mixed-case"] == "Yes", "header names are lowercased")
            #expect(request.cookies == ["a": "1", "b": "two"])
            #expect(request.body == Array("hello".utf8))
            #expect(request.peerAddress == "127.0.0.1")
        }
    }

    @Test func aChunkedBodyArrivesWhole() async throws {
        try await withServer({ request, responder in responder.respond(HTTPResponse(status: 200, body: request.body)) }) { server in
            let r = try exchange(server.port, "POST /p HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                 + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            #expect(r?.status == 200)
            #expect(r?.text == "hello world")
        }
    }

    @Test func anAnswerFromAnotherThreadIsSentWhenItComes() async throws {
        try await withServer({ _, responder in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) { responder.respond(ok("later")) }
        }) { server in
            let r = try exchange(server.port, get("/"))
            #expect(r?.status == 200)
            #expect(r?.text == "later")
            #expect(await Poll.until { server.statistics.suspended == 0 && server.statistics.open == 0 })
        }
    }

    @Test func twoHundredWaitingRequestsLeaveTheServerFreeForAnImmediateOne() async throws {
        let kept = KeptResponders()
        try await withServer({ request, responder in
            if request.path == "/now" { responder.respond(ok("now")) } else { kept.keep(request, responder) }
        }) { server in
            let clients = try (0..<200).map { _ in try RawConnection(port: server.port) }
            for (i, c) in clients.enumerated() { c.send(get("/wait/\(i)")) }
            #expect(await Poll.until { server.statistics.suspended == 200 }, "\(server.statistics)")
            let now = try exchange(server.port, get("/now"))
            #expect(now?.text == "now", "answered while 200 requests wait")
            #expect(server.statistics.suspended == 200, "they still wait")
            let waiting = kept.take()
            // Answered from another thread, in reverse order of arrival.
            DispatchQueue.global().async {
                for w in waiting.reversed() { w.responder.respond(ok(w.path)) }
            }
            for (i, c) in clients.enumerated() {
                #expect(c.response()?.text == "/wait/\(i)")
            }
            #expect(await Poll.until { server.statistics.suspended == 0 })
            #expect(server.statistics.respondersDropped == 0)
        }
    }

    @Test func aResponderReleasedWithoutAnAnswerAnswers500() async throws {
        let kept = KeptResponders()
        try await withServer({ request, responder in
            if request.path == "/keep" { kept.keep(request, responder) }
            // Anything else: the responder is dropped when the handler returns.
        }) { server in
            let dropped = try exchange(server.port, get("/ignore"))
            #expect(dropped?.status == 500)
            #expect(server.statistics.respondersDropped == 1)

            let c = try RawConnection(port: server.port)
            c.send(get("/keep"))
            #expect(await Poll.until { kept.count == 1 && server.statistics.suspended == 1 })
            // The last reference goes on another thread, later.
            DispatchQueue.global().async { _ = kept.take() }
            #expect(c.response()?.status == 500)
            #expect(server.statistics.respondersDropped == 2)
            #expect(await Poll.until { server.statistics.suspended == 0 })
        }
    }

    @Test func theFirstAnswerWinsAndLaterOnesAreIgnored() async throws {
        let kept = KeptResponders()
        let ignoredStream = ScriptedStream([.text("never")])
        try await withServer({ request, responder in
            if request.path == "/twice" {
                responder.respond(ok("first"))
                responder.respond(ok("second"))
            } else {
                kept.keep(request, responder)
            }
        }) { server in
            #expect(try exchange(server.port, get("/twice"))?.text == "first")
            let c = try RawConnection(port: server.port)
            c.send(get("/later"))
            #expect(await Poll.until { kept.count == 1 })
            let responder = try #require(kept.take().first?.responder)
            responder.respond(ok("one"))
            responder.respond(ok("two"))
            responder.respond(HTTPResponse(status: 200, stream: ignoredStream, idleTimeout: .seconds(5)))
            #expect(c.response()?.text == "one")
            #expect(responder.hasResponded)
            #expect(ignoredStream.closedCount == 1, "a stream in an ignored answer is closed")
            #expect(ignoredStream.asked == 0)
        }
    }

    @Test func anAnswerForAClientThatLeftIsDroppedQuietly() async throws {
        let kept = KeptResponders()
        try await withServer({ request, responder in
            if request.path == "/now" { responder.respond(ok("now")) } else { kept.keep(request, responder) }
        }) { server in
            var c: RawConnection? = try RawConnection(port: server.port)
            c?.send(get("/wait"))
            #expect(await Poll.until { server.statistics.suspended == 1 })
            c?.hangUp()
            c = nil
            for w in kept.take() { w.responder.respond(ok("too late")) }
            #expect(await Poll.until { server.statistics.open == 0 && server.statistics.suspended == 0 }, "\(server.statistics)")
            #expect(try exchange(server.port, get("/now"))?.text == "now")
        }
    }

    @Test func stoppingAnswersWaitingRequestsWith503() async throws {
        let kept = KeptResponders()
        let server = try HTTPServer(host: "127.0.0.1", port: 0) { request, responder in kept.keep(request, responder) }
        let c = try RawConnection(port: server.port)
        c.send(get("/wait"))
        #expect(await Poll.until { server.statistics.suspended == 1 })
        server.stop()
        let r = c.response()
        #expect(r?.status == 503)
        let responder = try #require(kept.take().first?.responder)
        #expect(responder.hasResponded)
        responder.respond(ok("after the stop"))
        server.stop()
    }

    @Test func invalidLimitsAreAllReportedAtOnce() {
        let limits = HTTPServer.Limits(connections: 0, connectionsPerAddress: -1, idleTimeout: .zero, requestDeadline: .milliseconds(1), maximumBodySize: -5)
        #expect(limits.problems.count == 5)
        do {
            _ = try HTTPServer(host: "127.0.0.1", port: 0, limits: limits) { _, _ in }
            Issue.record("started with invalid limits")
        } catch {
            #expect(error.description.hasPrefix("invalid HTTP server settings: connections must be 1 to 1000000, got 0; "), "\(error)")
        }
    }
}
