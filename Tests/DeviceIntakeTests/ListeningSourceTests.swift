import DeviceIntake
import Foundation
import GatewayCore
import GatewayTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct ListeningSourceTests {
    @Test func answersPositionsOnlyOnceTheyAreHandled() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        defer { Task { await running.stop() } }
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 111\n")
        #expect(device.read(count: 3) == Array("OK\n".utf8))
        device.send("P 1000 2000\n")
        #expect(await Poll.until { acks.positions.count == 2 })
        // Taken over by the pipeline but not handled: no answer yet.
        #expect(device.readSome(timeout: .milliseconds(300)) == [])
        acks.acknowledge()
        #expect(device.read(count: 7) == Array("A 1000\n".utf8))
        #expect(await Poll.until { running.context.stats.value("acks.sent") == 1 })
        await running.stop()
    }

    @Test func stampsSourceDeviceAttributesAndIdsThatAResendRepeats() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 111\nP 5000 5000 6000\n")
        #expect(await Poll.until { acks.positions.count == 3 })
        // The answer never came: the device resends on a new connection.
        device.close()
        let again = try LoopbackTCPClient(port: running.port)
        again.send("I 111\nP 5000 5000 6000\n")
        #expect(await Poll.until { acks.positions.count == 6 })
        let ids = acks.positions.map(\.id)
        #expect(Array(ids[0..<3]) == ["trackers-truck-1-5000", "trackers-truck-1-5000-1", "trackers-truck-1-6000"])
        #expect(Array(ids[3..<6]) == Array(ids[0..<3]))
        #expect(acks.positions.allSatisfy { $0.source == "trackers" && $0.device == "truck-1" && $0.attributes["fleet"] == "north" })
        await running.stop()
    }

    @Test func refusesAnUnknownDeviceAndSaysSo() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 999\nP 1000\n")
        #expect(device.read(count: 3) == Array("NO\n".utf8))
        #expect(device.waitForClose())
        #expect(acks.positions.isEmpty)
        #expect(running.context.stats.value("devices.unknown") == 1)
        await running.stop()
    }

    @Test func acceptsUnknownDevicesUnderTheirOwnIdentifierWhenAsked() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(devices: DeviceDirectoryConfiguration(acceptUnknown: true), output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 999\nP 1000\n")
        #expect(device.read(count: 3) == Array("OK\n".utf8))
        #expect(await Poll.until { acks.positions.count == 1 })
        #expect(acks.positions.first?.device == "999")
        await running.stop()
    }

    @Test func identifiesByTheFrameWhenTheProtocolHasNoLogin() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("U 222 7000\n")
        #expect(await Poll.until { acks.positions.count == 1 })
        #expect(acks.positions.first?.device == "truck-2")
        acks.acknowledge()
        #expect(device.read(count: 7) == Array("A 7000\n".utf8))
        let stranger = try LoopbackTCPClient(port: running.port)
        stranger.send("U 333 7000\n")
        #expect(stranger.waitForClose())
        #expect(acks.positions.count == 1)
        await running.stop()
    }

    @Test func answersHeartbeatsAtOnceAndWritesPositionAnswersInFrameOrder() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 111\n")
        #expect(device.read(count: 3) == Array("OK\n".utf8))
        device.send("P 1\n")
        #expect(await Poll.until { acks.batches == 1 })
        device.send("P 2\n")
        #expect(await Poll.until { acks.batches == 2 })
        // The second batch is handled first: its answer must wait for the first one's.
        acks.acknowledge(only: 1)
        device.send("H\n")
        #expect(device.read(count: 2) == Array("h\n".utf8))
        #expect(device.readSome(timeout: .milliseconds(300)) == [])
        acks.acknowledge()
        #expect(device.read(count: 8) == Array("A 1\nA 2\n".utf8))
        await running.stop()
    }

    @Test func stopsReadingAConnectionWhoseWindowIsFull() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(Listening.configuration { $0.maxUnacked = 3 }, output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 111\nP 1 2 3\n")
        #expect(await Poll.until { acks.positions.count == 3 })
        device.send("P 4\n")
        // Not read while three positions wait: the kernel holds the bytes.
        try await Task.sleep(for: .milliseconds(300))
        #expect(acks.positions.count == 3)
        acks.acknowledge()
        #expect(await Poll.until { acks.positions.count == 4 })
        await running.stop()
    }

    @Test func countsBadFramesAndNeverAnswersThem() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 111\nX\n" + String(repeating: "y", count: 100) + "\nP 9\n")
        #expect(device.read(count: 3) == Array("OK\n".utf8))
        #expect(await Poll.until { acks.positions.count == 1 })
        acks.acknowledge()
        #expect(device.read(count: 4) == Array("A 9\n".utf8))
        #expect(running.context.stats.value("frames.bad.syntax") == 1)
        #expect(running.context.stats.value("frames.bad.too_large") == 1)
        device.send("Z\nP 10\n")
        #expect(device.waitForClose())
        #expect(acks.positions.count == 1)
        await running.stop()
    }

    @Test func closesConnectionsThatDoNotIdentifyOrFallSilent() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(Listening.configuration {
            $0.handshakeTimeout = .milliseconds(500)
            $0.idleTimeout = .seconds(2)
        }, output: acks.output)
        let silent = try LoopbackTCPClient(port: running.port)
        let idle = try LoopbackTCPClient(port: running.port)
        idle.send("I 111\n")
        #expect(idle.read(count: 3) == Array("OK\n".utf8))
        #expect(silent.waitForClose(timeout: .seconds(5)))
        #expect(idle.waitForClose(timeout: .seconds(6)))
        #expect(running.context.stats.value("connections.closed.handshake_timeout") >= 1)
        #expect(running.context.stats.value("connections.closed.idle") == 1)
        await running.stop()
    }

    @Test func refusesConnectionsBeyondTheLimits() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(Listening.configuration { $0.maxConnections = 3 }, output: acks.output)
        let kept = try (0..<3).map { _ in try LoopbackTCPClient(port: running.port) }
        for (i, c) in kept.enumerated() {
            c.send("I 111\nP \(i)\n")
            #expect(c.read(count: 3) == Array("OK\n".utf8))
        }
        let fourth = try LoopbackTCPClient(port: running.port)
        #expect(fourth.waitForClose())
        #expect(running.context.stats.value("connections.refused.limit") == 1)
        #expect(running.context.stats.value("connections.open") == 3)
        kept[0].close()
        #expect(await Poll.until { running.context.stats.value("connections.open") == 2 })
        let fifth = try LoopbackTCPClient(port: running.port)
        fifth.send("I 222\n")
        #expect(fifth.read(count: 3) == Array("OK\n".utf8))
        await running.stop()

        let perAddress = try await Listening.start(Listening.configuration { $0.maxConnectionsPerAddress = 2 }, output: acks.output)
        let two = try (0..<2).map { _ in try LoopbackTCPClient(port: perAddress.port) }
        for c in two {
            c.send("H\n")
            #expect(c.read(count: 2) == Array("h\n".utf8))
        }
        let third = try LoopbackTCPClient(port: perAddress.port)
        #expect(third.waitForClose())
        #expect(perAddress.context.stats.value("connections.refused.per_address") == 1)
        await perAddress.stop()
    }

    @Test func closesEveryConnectionWhenStoppedWithoutTheAnswersStillOwed() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(output: acks.output)
        let device = try LoopbackTCPClient(port: running.port)
        device.send("I 111\nP 1\n")
        #expect(device.read(count: 3) == Array("OK\n".utf8))
        #expect(await Poll.until { acks.positions.count == 1 })
        await running.stop()
        #expect(device.waitForClose())
        // Handled after the stop: the answer has no connection to go to.
        acks.acknowledge()
        #expect((try? LoopbackTCPClient(port: running.port)) == nil)
    }

    @Test func namesConnectionsByAddressWhenTheProtocolCannot() async throws {
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(devices: DeviceDirectoryConfiguration(acceptUnknown: true), output: acks.output,
                                                identifyAtAccept: { $0.host })
        let device = try LoopbackTCPClient(port: running.port)
        device.send("P 42\n")
        #expect(await Poll.until { acks.positions.count == 1 })
        #expect(acks.positions.first?.device == "127.0.0.1")
        await running.stop()
    }

    @Test func readsADevicesFileAgainWhenItChanges() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/devices.json"
        try #"{ "111": "truck-1" }"#.write(toFile: file, atomically: true, encoding: .utf8)
        let acks = HeldAcknowledgements()
        let running = try await Listening.start(devices: DeviceDirectoryConfiguration(file: file), output: acks.output)
        let before = try LoopbackTCPClient(port: running.port)
        before.send("I 444\n")
        #expect(before.read(count: 3) == Array("NO\n".utf8))
        try #"{ "111": "truck-one", "444": {"name": "van-4", "attributes": {"fleet": "south"}} }"#.write(toFile: file, atomically: true, encoding: .utf8)
        // The file is checked at most every two seconds, when an unknown device calls.
        var answer: [UInt8] = []
        for _ in 0..<40 where answer != Array("OK\n".utf8) {
            let again = try LoopbackTCPClient(port: running.port)
            again.send("I 444\nP 3\n")
            answer = again.read(count: 3)
            if answer != Array("OK\n".utf8) { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(answer == Array("OK\n".utf8))
        #expect(await Poll.until { acks.positions.contains { $0.device == "van-4" && $0.attributes["fleet"] == "south" } })
        // A renamed device starts afresh in stateful transforms (state is kept by name): said once.
        let log = try #require(running.context.logger.handler as? RecordingLogHandler)
        #expect(log.entries(containing: "renamed 111 (truck-1 → truck-one)").count == 1, "\(log.entries)")
        await running.stop()
    }
}

@Suite(.timeLimit(.minutes(1))) struct DatagramSourceTests {
    @Test func answersADatagramToItsSenderOnlyOnceHandled() async throws {
        let acks = HeldAcknowledgements()
        let context = SourceConformance.makeContext(id: "udp_trackers")
        let port = LoopbackTCPServer.freePort(udp: true)
        let source = ListeningSource(protocolName: "line", transport: .udp(ListenAddress(host: "127.0.0.1", port: port), maxDatagramBytes: 512),
                                     directory: Listening.devices, context: context) { _ in LineCodec() }
        let task = Task { try await source.run(output: acks.output) }
        let device = try LoopbackUDPSender()
        // The socket is bound once the first datagram is taken.
        #expect(await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
            device.send(Array("U 222 8000\n".utf8), to: port)
            return !acks.positions.isEmpty
        })
        #expect(device.receive(timeout: .milliseconds(300)) == nil)
        acks.acknowledge()
        #expect(device.receive() == Array("A 8000\n".utf8))
        #expect(acks.positions.first?.device == "truck-2")
        device.send(Array("U 999 8000\n".utf8), to: port)
        device.send(Array("X\n".utf8), to: port)
        #expect(await Poll.until { context.stats.value("devices.unknown") == 1 && context.stats.value("frames.bad.syntax") == 1 })
        task.cancel()
        _ = await task.result
    }
}
