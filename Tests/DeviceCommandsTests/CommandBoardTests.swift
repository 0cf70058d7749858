import DeviceCommands
import Foundation
import GatewayCore
import GatewayTesting
import Locking
import SQLiteState
import Testing

/// A device connection as the board sees it: records what it was asked to send.
final class RecordingLink: CommandLink, Sendable {
    let sent = Locked<[DeviceCommand]>([])
    /// Whether what it was asked to send is still on its way (a parked OwnTracks command, bytes
    /// the loop has not written): then a withdrawn command is taken back from `sent`.
    let onItsWay: Bool
    init(onItsWay: Bool = false) { self.onItsWay = onItsWay }
    func send(_ command: DeviceCommand) { sent.withLock { $0.append(command) } }
    func withdraw(_ id: String) -> Bool {
        guard onItsWay else { return false }
        return sent.withLock { s in
            guard let i = s.firstIndex(where: { $0.id == id }) else { return false }
            s.remove(at: i)
            return true
        }
    }
    var ids: [String] { sent.withLock { $0.map(\.id) } }
}

/// Events the board emitted.
final class EventLog: Sendable {
    let positions = Locked<[Position]>([])
    func append(_ p: Position) { positions.withLock { $0.append(p) } }
}

/// The board over a store, with one source `trk` that carries every type but `text`.
struct BoardFixture {
    let clock = ManualClock()
    let store: any CommandStore
    let board: CommandBoard
    let events = EventLog()

    init(store: any CommandStore = MemoryCommandStore(), devices: [String] = ["bus-12"]) throws {
        self.store = store
        board = try CommandBoard(store: store, clock: clock, logger: Logger(label: "commands", handler: SilentLogHandler()))
        let events = self.events
        board.register(source: "trk", types: Set(CommandType.allCases).subtracting([.text])) { e in events.append(e) }
        board.knows(devices: devices, source: "trk")
    }

    func submit(_ type: CommandType = .setInterval, _ parameters: [String: String] = ["interval": "20s"], device: String = "bus-12",
                id: String? = nil, ttl: Duration? = nil, attempts: Int? = nil) throws(CommandError) -> DeviceCommand {
        try board.submit(CommandRequest(device: device, type: type, parameters: parameters, id: id, ttl: ttl, attempts: attempts, submittedBy: "ops"))
    }

    /// The statuses the events said, in order, for one command.
    func statuses(_ id: String) -> [String] {
        events.positions.withLock { $0.filter { $0.attributes["command_id"] == id }.compactMap { $0.event?.status } }
    }
}

@Suite(.timeLimit(.minutes(1))) struct CommandBoardTests {
    @Test func aCommandForAnOfflineDeviceGoesWhenItConnectsAndIsDoneWhenItAnswers() async throws {
        let f = try BoardFixture()
        let c = try f.submit()
        #expect(c.status == .queued)
        #expect(c.submittedBy == "ops" && c.source == "trk")
        #expect(c.expires.milliseconds - c.created.milliseconds == 86_400_000)
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        #expect(await Poll.until { link.ids == [c.id] })
        #expect(f.board.command(c.id)?.status == .sent)
        #expect(f.board.command(c.id)?.sends == 1)
        f.board.answered(c.id, outcome: .done("success"))
        #expect(await Poll.until { f.board.command(c.id)?.status == .done })
        #expect(f.board.command(c.id)?.result == "success")
        #expect(f.board.command(c.id)?.history.map(\.status) == [.queued, .sent, .done])
        #expect(await Poll.until { f.statuses(c.id) == ["queued", "sent", "done"] })
        #expect(f.board.shadow(device: "bus-12") == [.setInterval: "20"])
    }

    @Test func oneCommandAtATimeOldestFirst() async throws {
        let f = try BoardFixture()
        let first = try f.submit(), second = try f.submit(.positionNow, [:]), third = try f.submit(.reboot, [:])
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        #expect(await Poll.until { link.ids == [first.id] })
        // Until the first is answered, nothing else goes.
        // A command submitted while one is in flight waits too.
        let fourth = try f.submit(.engineStop, [:])
        try await Task.sleep(for: .milliseconds(100))
        #expect(link.ids == [first.id])
        f.board.answered(first.id, outcome: .failed("not supported"))
        #expect(await Poll.until { link.ids == [first.id, second.id] })
        f.board.answered(second.id, outcome: .delivered)
        #expect(await Poll.until { link.ids == [first.id, second.id, third.id] })
        f.board.answered(third.id, outcome: .done("success"))
        #expect(await Poll.until { link.ids == [first.id, second.id, third.id, fourth.id] })
        #expect(f.board.command(first.id)?.status == .failed)
        #expect(f.board.command(second.id)?.status == .delivered)
    }

    @Test func anUnansweredCommandIsSentAgainOnTheNextConnectionUpToItsAttempts() async throws {
        let f = try BoardFixture()
        let c = try f.submit(attempts: 2)
        for round in 1...2 {
            let link = RecordingLink()
            f.board.connected("bus-12", source: "trk", link: link)
            #expect(await Poll.until { link.ids == [c.id] }, "round \(round)")
            f.board.disconnected("bus-12", link: link)
        }
        let third = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: third)
        #expect(await Poll.until { f.board.command(c.id)?.status == .failed })
        #expect(third.ids.isEmpty)
        #expect(f.board.command(c.id)?.result == "no answer after 2 send(s)")
    }

    @Test func anExpiredCommandIsNeverSent() async throws {
        let f = try BoardFixture()
        let c = try f.submit(ttl: .seconds(60))
        f.clock.advance(by: .seconds(61))
        f.board.sweep()
        #expect(f.board.command(c.id)?.status == .expired)
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        let later = try f.submit(.positionNow, [:])
        #expect(await Poll.until { link.ids == [later.id] })
    }

    @Test func aCancelledCommandIsNeverSentAndADeliveredOneCannotBeCancelled() async throws {
        let f = try BoardFixture()
        let c = try f.submit()
        #expect(try f.board.cancel(c.id, by: "ops").status == .cancelled)
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        let next = try f.submit(.positionNow, [:])
        #expect(await Poll.until { link.ids == [next.id] })
        f.board.answered(next.id, outcome: .done("position reported"))
        #expect(await Poll.until { f.board.command(next.id)?.status == .done })
        #expect(throws: CommandError.self) { try f.board.cancel(next.id, by: "ops") }
        // A late answer to the cancelled command changes nothing.
        f.board.answered(c.id, outcome: .done("success"))
        f.board.sweep()
        #expect(f.board.command(c.id)?.status == .cancelled)
    }

    @Test func aCommandCancelledOnItsWayKeepsItsPlaceUntilTheDeviceAnswersIt() async throws {
        let f = try BoardFixture()
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        let x = try f.submit(.engineStop, [:]), y = try f.submit(.engineResume, [:])
        #expect(await Poll.until { link.ids == [x.id] })
        // Its bytes went: the device's answer to it must not be taken for the next one's.
        #expect(try f.board.cancel(x.id, by: "ops").status == .cancelled)
        f.board.sweep()
        #expect(link.ids == [x.id])
        f.board.answered(x.id, outcome: .done("Relay,1 OK"))
        #expect(await Poll.until { link.ids == [x.id, y.id] })
        // The device did it: that is what its status says.
        #expect(f.board.command(x.id)?.history.map(\.status) == [.queued, .sent, .cancelled, .done])
    }

    @Test func aCommandCancelledOrExpiredBeforeItsBytesWentIsTakenBackAndTheNextGoes() async throws {
        let f = try BoardFixture()
        let link = RecordingLink(onItsWay: true)
        f.board.connected("bus-12", source: "trk", link: link)
        let x = try f.submit(.positionNow, [:], ttl: .seconds(10)), y = try f.submit(.reboot, [:])
        #expect(await Poll.until { link.ids == [x.id] })
        f.clock.advance(by: .seconds(11))
        f.board.sweep()
        #expect(f.board.command(x.id)?.status == .expired)
        #expect(await Poll.until { link.ids == [y.id] }, "\(link.ids)")
        #expect(try f.board.cancel(y.id, by: "ops").status == .cancelled)
        let z = try f.submit(.engineResume, [:])
        #expect(await Poll.until { link.ids == [z.id] })
    }

    @Test func theTimeToLiveGovernsSendingAndALateAnswerIsRecorded() async throws {
        let f = try BoardFixture()
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        let x = try f.submit(.engineStop, [:], ttl: .seconds(10)), y = try f.submit(.positionNow, [:])
        #expect(await Poll.until { link.ids == [x.id] })
        // Past its time to live, its bytes long gone: the answer is awaited, not declared lost.
        f.clock.advance(by: .seconds(11))
        f.board.sweep()
        #expect(f.board.command(x.id)?.status == .sent)
        // The answer timeout (60 s): the next goes, and x, past its time to live, expired.
        f.clock.advance(by: .seconds(50))
        f.board.sweep()
        #expect(await Poll.until { link.ids == [x.id, y.id] })
        #expect(f.board.command(x.id)?.status == .expired)
        // The device did stop the engine, late: recorded.
        f.board.answered(x.id, outcome: .done("Relay,1 OK"))
        #expect(await Poll.until { f.board.command(x.id)?.status == .done })
        #expect(f.board.command(x.id)?.result == "Relay,1 OK")
    }

    @Test func anUnansweredCommandLetsTheNextGoAfterTheAnswerTimeoutAndGoesAgainOnlyOnANewConnection() async throws {
        let f = try BoardFixture()
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        let x = try f.submit(.setInterval, ["interval": "20s"]), y = try f.submit(.positionNow, [:])
        #expect(await Poll.until { link.ids == [x.id] })
        f.clock.advance(by: .seconds(59))
        f.board.sweep()
        #expect(link.ids == [x.id])
        f.clock.advance(by: .seconds(1))
        f.board.sweep()
        #expect(await Poll.until { link.ids == [x.id, y.id] })
        f.board.answered(y.id, outcome: .done("ok"))
        f.board.sweep()
        // Not again on the connection that did not answer it...
        #expect(link.ids == [x.id, y.id])
        #expect(f.board.command(x.id)?.status == .sent)
        // ...but on the next.
        let next = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: next)
        #expect(await Poll.until { next.ids == [x.id] })
        #expect(f.board.command(x.id)?.sends == 2)
    }

    @Test func endedCommandsAreForgottenAfterRetainWhileRunning() async throws {
        let clock = ManualClock()
        let store = MemoryCommandStore()
        let board = try CommandBoard(store: store, settings: .init(retain: .seconds(3_600)), clock: clock,
                                     logger: Logger(label: "commands", handler: SilentLogHandler()))
        defer { board.close() }
        board.register(source: "trk", types: [.positionNow]) { _ in }
        board.knows(devices: ["bus-12"], source: "trk")
        let link = RecordingLink()
        board.connected("bus-12", source: "trk", link: link)
        let x = try board.submit(CommandRequest(device: "bus-12", type: .positionNow, submittedBy: "ops"))
        let y = try board.submit(CommandRequest(device: "bus-12", type: .positionNow, submittedBy: "ops"))
        #expect(await Poll.until { link.ids == [x.id] })
        board.answered(x.id, outcome: .done("ok"))
        #expect(await Poll.until { link.ids == [x.id, y.id] })
        clock.advance(by: .seconds(3_601))
        board.sweep()
        #expect(board.command(x.id) == nil)
        #expect(try store.load().map(\.id) == [y.id])
        // Still sent, still waiting for its answer: kept.
        #expect(board.commands(device: "bus-12").map(\.id) == [y.id])
        #expect(board.isKnown(device: "bus-12") && !board.isKnown(device: "ghost"))
    }

    @Test func requestsTheDeviceOrItsProtocolCannotTakeAreRefusedWhenSubmitted() throws {
        let f = try BoardFixture()
        #expect(throws: CommandError.unknownDevice("ghost")) { try f.submit(device: "ghost") }
        do {
            _ = try f.submit(.text, ["text": "hello"])
            Issue.record("text was taken by a source that cannot carry it")
        } catch {
            #expect(error.httpStatus == 422)
        }
        #expect(throws: CommandError.self) { try f.submit(.setInterval, ["interval": "forever"]) }
        _ = try f.submit(id: "mine")
        do {
            _ = try f.submit(id: "mine")
            Issue.record("a taken id was taken again")
        } catch {
            #expect(error.httpStatus == 409)
        }
        #expect(f.board.commands(device: "bus-12").count == 1)
    }

    @Test func aSentCommandIsSentAgainAfterARestartAndAnAnsweredOneNever() async throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/commands.sqlite"
        var answered = "", pending = ""
        do {
            let f = try BoardFixture(store: try SQLiteCommandStore(path: path, clock: ManualClock()))
            let a = try f.submit(.positionNow, [:]), b = try f.submit()
            answered = a.id
            pending = b.id
            let link = RecordingLink()
            f.board.connected("bus-12", source: "trk", link: link)
            #expect(await Poll.until { link.ids == [a.id] })
            f.board.answered(a.id, outcome: .done("position reported"))
            #expect(await Poll.until { link.ids == [a.id, b.id] })
            // The process ends with b sent and not answered.
            f.board.close()
        }
        let f = try BoardFixture(store: try SQLiteCommandStore(path: path, clock: ManualClock()), devices: [])
        #expect(f.board.command(answered)?.status == .done)
        #expect(f.board.command(pending)?.status == .sent)
        // The device connected before: it is known without being listed.
        let link = RecordingLink()
        f.board.connected("bus-12", source: "trk", link: link)
        #expect(await Poll.until { link.ids == [pending] })
        #expect(f.board.command(pending)?.sends == 2)
        _ = try f.submit(.reboot, [:])
        f.board.close()
    }
}

@Suite struct CommandRequestTests {
    @Test func aBodyIsReadWithEveryProblem() throws {
        let good = try CommandRequest.parse(try JSONValue.parse(string: #"{"type": "set_interval", "interval": "20s", "ttl": "2h", "attempts": 5, "id": "c-1"}"#),
                                            device: "bus", submittedBy: "ops")
        #expect(good.type == .setInterval && good.parameters == ["interval": "20s"] && good.ttl == .seconds(7200) && good.attempts == 5 && good.id == "c-1")
        let bad = try JSONValue.parse(string: #"{"type": "set_interval", "every": "20s", "attempts": 0}"#)
        do {
            _ = try CommandRequest.parse(bad, device: "bus", submittedBy: "ops")
            Issue.record("a bad body was taken")
        } catch {
            #expect(error.httpStatus == 400)
            #expect(error.problems.count == 3, "\(error.problems)")
        }
        #expect(throws: CommandError.self) { try CommandRequest.parse(try JSONValue.parse(string: #"{"type": "launch"}"#), device: "bus", submittedBy: "ops") }
        #expect(throws: CommandError.self) { try CommandRequest.parse(try JSONValue.parse(string: #"{"type": "custom", "hex": "7e0"}"#), device: "bus", submittedBy: "ops") }
    }

    @Test(arguments: [#""1e300""#, "1e300", #""-1e300""#, #""nan""#, #""inf""#, "-1"])
    func aDurationBeyondACenturyOrNoNumberIsAProblemNotACrash(_ value: String) throws {
        for body in [#"{"type": "position_now", "ttl": \#(value)}"#, #"{"type": "set_interval", "interval": \#(value)}"#] {
            #expect(throws: CommandError.self, "\(body)") {
                try CommandRequest.parse(try JSONValue.parse(string: body), device: "bus", submittedBy: "ops")
            }
        }
    }

    /// `flags` of a `text` (JT/T 808's 0x8300 flag byte): a number from 0 to 255, decimal or 0x hex.
    @Test func aTextsFlagsAreOneByte() {
        for good in ["12", "0x0C", "0X01", "0", "255"] {
            #expect(CommandRequest.check(.text, ["text": "hi", "flags": good]).isEmpty, "\(good)")
        }
        for bad in ["256", "-1", "0x", "twelve", "", "1.5", "0x100"] {
            #expect(CommandRequest.check(.text, ["text": "hi", "flags": bad]) == ["flags: a number from 0 to 255 (0x00 to 0xFF)"], "\(bad)")
        }
        #expect(CommandRequest.check(.custom, ["data": "x", "flags": "1"]).count == 1)
    }

    @Test func aCommandReadsBackFromItsJSON() throws {
        var c = DeviceCommand(id: "c-1", device: "bus", type: .text, parameters: ["text": "停车"], created: Timestamp(milliseconds: 1_000),
                              expires: Timestamp(milliseconds: 90_000), attempts: 3, submittedBy: "ops", source: "jt")
        c.sends = 1
        c.move(to: .sent, at: Timestamp(milliseconds: 2_000))
        c.move(to: .done, at: Timestamp(milliseconds: 3_000), result: "success")
        #expect(DeviceCommand(json: try JSONValue.parse(string: c.json.jsonText)) == c)
    }
}
