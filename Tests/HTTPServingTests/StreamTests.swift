import GatewayTesting
import HTTPServing
import Locking
import Testing

/// Streamed bodies: suspended while they have nothing, woken by their body, ended by the client
/// leaving or the server stopping.
@Suite(.timeLimit(.minutes(1)))
struct StreamTests {
    /// `/stream` answers with `stream`, anything else at once.
    func handler(_ stream: ScriptedStream) -> HTTPServer.Handler {
        { request, responder in
            if request.path == "/stream" {
                responder.respond(HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")], stream: stream, idleTimeout: .seconds(30)))
            } else {
                responder.respond(ok("now"))
            }
        }
    }

    func contains(_ text: String) -> ([UInt8]) -> Bool {
        { String(decoding: $0, as: UTF8.self).contains(text) }
    }

    @Test func aWaitingStreamIsSuspendedCostsNoCPUAndLetsOthersBeServed() async throws {
        let stream = ScriptedStream([.text("hello\n")])
        try await withServer(handler(stream)) { server in
            let c = try RawConnection(port: server.port)
            c.send(get("/stream"))
            c.read(until: contains("hello"))
            #expect(await Poll.until { server.statistics.suspended == 1 })
            let asked = stream.asked
            let thread = stream.eventThread
            let before = try #require(cpuTicks(ofThread: thread), "the event thread \(thread) is listed")
            // A second of waiting for bytes that must not come, with other requests served meanwhile.
            for _ in 0..<20 { #expect(try exchange(server.port, get("/other"))?.text == "now") }
            let nothing = c.read(timeout: .seconds(1), until: contains("world"))
            #expect(!String(decoding: nothing, as: UTF8.self).contains("world"))
            let used = try #require(cpuTicks(ofThread: thread)) - before
            #expect(used < ticksPerSecond / 10, "the event thread used \(used) ticks while the stream waited")
            #expect(stream.asked == asked, "a suspended body is not asked again until woken")
            #expect(server.statistics.suspended == 1)

            stream.push(.text("world\n"))
            c.read(until: contains("world"))
            stream.push(.end)
            let r = c.response()
            #expect(r?.complete == true, "the chunked body ended")
            #expect(r?.text == "hello\nworld\n")
            #expect(await Poll.until { stream.closedCount == 1 })
            #expect(server.statistics.suspended == 0)
        }
    }

    @Test func aWakeWhileTheBodyIsAskedIsNotLost() async throws {
        /// Says "later" once, having woken itself first: the wake must not be lost to the suspension.
        final class SelfWaking: HTTPStreamBody, Sendable {
            let state = Locked<(step: Int, waker: HTTPStreamWaker?)>((0, nil))
            func start(waker: HTTPStreamWaker) { state.withLock { $0.waker = waker } }
            func next() -> HTTPStreamChunk {
                let (step, waker) = state.withLock { s in
                    defer { s.step += 1 }
                    return (s.step, s.waker)
                }
                switch step {
                case 0: return .text("a")
                case 1:
                    waker?.wake()
                    return .later
                case 2: return .text("b")
                default: return .end
                }
            }
        }
        try await withServer({ _, responder in
            responder.respond(HTTPResponse(status: 200, stream: SelfWaking(), idleTimeout: .seconds(30)))
        }) { server in
            let r = try exchange(server.port, get("/"))
            #expect(r?.complete == true)
            #expect(r?.text == "ab")
        }
    }

    @Test func aStreamWhoseClientLeftIsClosedWhileItWaits() async throws {
        let stream = ScriptedStream([.text("hello\n")])
        try await withServer(handler(stream)) { server in
            var c: RawConnection? = try RawConnection(port: server.port)
            c?.send(get("/stream"))
            c?.read(until: contains("hello"))
            #expect(await Poll.until { server.statistics.suspended == 1 })
            c?.hangUp()
            c = nil
            // Nothing is ever pushed: the server notices the client left by itself.
            #expect(await Poll.until(timeout: .seconds(5)) { stream.closedCount == 1 })
            #expect(await Poll.until { server.statistics.open == 0 && server.statistics.suspended == 0 })
        }
    }

    @Test func stoppingEndsAWaitingStream() async throws {
        let stream = ScriptedStream([.text("hello\n")])
        let server = try HTTPServer(host: "127.0.0.1", port: 0, handler: handler(stream))
        let c = try RawConnection(port: server.port)
        c.send(get("/stream"))
        c.read(until: contains("hello"))
        #expect(await Poll.until { server.statistics.suspended == 1 })
        server.stop()
        let r = c.response()
        #expect(r?.complete == true, "the stream ended properly, not cut off")
        #expect(stream.closedCount == 1)
        stream.push(.text("after the stop"))
    }
}
