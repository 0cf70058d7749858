import DeviceCommands
import GatewayCore
import GatewayTesting
import Locking
import Testing

/// A fleet's shared store in memory: one backing store, a view per gateway, and each view's
/// writes handed to the other views' observers, at once or when the test releases them (a
/// subscription that is behind).
final class SharedCommandBus: Sendable {
    let backing = MemoryCommandStore()
    let holders = Locked<[String: CommandHolder]>([:])
    let views = Locked<[SharedCommandView]>([])
    /// Deliveries waiting for ``release()`` while held.
    let held = Locked<(holding: Bool, waiting: [(SharedCommandView, CommandStoreChange)])>((false, []))

    func view() -> SharedCommandView {
        let v = SharedCommandView(bus: self)
        views.withLock { $0.append(v) }
        return v
    }

    func hold() { held.withLock { $0.holding = true } }

    /// Delivers what waited, in order, and delivers at once from now on.
    func release() {
        let waiting = held.withLock { h in
            defer { h = (false, []) }
            return h.waiting
        }
        for (view, change) in waiting { view.deliver(change) }
    }

    func publish(_ change: CommandStoreChange, from writer: SharedCommandView) {
        for view in views.withLock({ $0 }) where view !== writer {
            let now = held.withLock { h -> Bool in
                if h.holding { h.waiting.append((view, change)) }
                return !h.holding
            }
            if now { view.deliver(change) }
        }
    }
}

final class SharedCommandView: CommandStore, Sendable {
    let bus: SharedCommandBus
    let observers = Locked<[@Sendable (CommandStoreChange) -> Void]>([])
    init(bus: SharedCommandBus) { self.bus = bus }

    var location: String { "a shared test bus" }
    var isShared: Bool { true }
    func load() throws -> [DeviceCommand] { try bus.backing.load() }
    func save(_ command: DeviceCommand, expecting: CommandStatus?) throws {
        if expecting == nil, try bus.backing.fetch(command.id) != nil { throw CommandError.conflict("command \(command.id) exists") }
        try bus.backing.save(command, expecting: expecting)
        bus.publish(.command(command), from: self)
    }
    func loadDevices() throws -> [String: String] { bus.holders.withLock { $0.mapValues(\.source) } }
    func saveDevice(_ device: String, source: String) throws {}
    func loadHolders() throws -> [String: CommandHolder] { bus.holders.withLock { $0 } }
    func announce(_ device: String, holder: CommandHolder) throws {
        bus.holders.withLock { $0[device] = holder }
        bus.publish(.holder(device: device, holder), from: self)
    }
    func purge(before: Timestamp) throws {}
    func close() {}
    func fetch(_ id: String) throws -> DeviceCommand? { try bus.backing.fetch(id) }
    func observe(_ changed: @escaping @Sendable (CommandStoreChange) -> Void) { observers.withLock { $0.append(changed) } }
    func deliver(_ change: CommandStoreChange) { for o in observers.withLock({ $0 }) { o(change) } }
}

/// Two gateways over one shared store, on one clock.
struct FleetFixture {
    let clock = ManualClock()
    let bus = SharedCommandBus()
    let a: CommandBoard, b: CommandBoard

    init() throws {
        a = try Self.board("gw-a", bus.view(), clock)
        b = try Self.board("gw-b", bus.view(), clock)
    }

    static func board(_ name: String, _ store: any CommandStore, _ clock: ManualClock) throws -> CommandBoard {
        let board = try CommandBoard(store: store, gateway: name, clock: clock, logger: Logger(label: "commands", handler: SilentLogHandler()))
        board.register(source: "trk", types: Set(CommandType.allCases)) { _ in }
        board.knows(devices: ["bus-12"], source: "trk")
        return board
    }

    func submit(at board: CommandBoard, _ type: CommandType = .positionNow) throws -> DeviceCommand {
        try board.submit(CommandRequest(device: "bus-12", type: type, submittedBy: "ops"))
    }

    /// Waits until both boards did what was queued before (their queues are serial; a pump may
    /// queue one more pass).
    func settle() {
        for _ in 0..<3 {
            a.sweep()
            b.sweep()
        }
    }

    func close() {
        a.close()
        b.close()
    }
}

@Suite(.timeLimit(.minutes(1))) struct CommandFleetTests {
    @Test func onlyTheGatewayWithTheNewestConnectionSendsAndNoOtherSendsItAgain() async throws {
        let f = try FleetFixture()
        defer { f.close() }
        // The device was on B; it moved to A a second later, and B's connection lingers.
        let onB = RecordingLink(), onA = RecordingLink()
        f.b.connected("bus-12", source: "trk", link: onB)
        f.settle()
        f.clock.advance(by: .seconds(1))
        f.a.connected("bus-12", source: "trk", link: onA)
        f.settle()
        let x = try f.submit(at: f.b, .engineStop)
        #expect(await Poll.until { onA.ids == [x.id] })
        // Later changes of the device's commands, on either gateway, send it nowhere again.
        let y = try f.submit(at: f.b)
        f.a.answered(x.id, outcome: .done("ok"))
        #expect(await Poll.until { onA.ids == [x.id, y.id] })
        _ = try f.submit(at: f.a, .reboot)
        f.settle()
        #expect(onB.ids.isEmpty, "the lingering connection was sent \(onB.ids)")
        #expect(f.a.command(x.id)?.sends == 1 && f.b.command(x.id)?.status == .done)
        #expect(f.b.command(x.id)?.sentOn?.hasPrefix("gw-a/") == true)
    }

    @Test func whatAnOlderConnectionSentBeforeItLearnedOfTheNewerGoesAgainOnTheNewer() async throws {
        let f = try FleetFixture()
        defer { f.close() }
        let onB = RecordingLink(), onA = RecordingLink()
        f.b.connected("bus-12", source: "trk", link: onB)
        f.settle()
        f.clock.advance(by: .seconds(1))
        // B's subscription is behind: it has not heard that A holds the device now.
        f.bus.hold()
        f.a.connected("bus-12", source: "trk", link: onA)
        f.settle()
        let x = try f.submit(at: f.b)
        #expect(await Poll.until { onB.ids == [x.id] })
        #expect(onA.ids.isEmpty)
        f.bus.release()
        // A holds the newest connection: it sends what went to the old one.
        #expect(await Poll.until { onA.ids == [x.id] })
        #expect(f.a.command(x.id)?.sends == 2)
        f.a.answered(x.id, outcome: .done("ok"))
        #expect(await Poll.until { f.b.command(x.id)?.status == .done })
        f.settle()
        #expect(onB.ids == [x.id] && onA.ids == [x.id])
    }

    @Test func readingACommandAtTheGatewayHoldingTheDeviceBeforeItsSubscriptionDoesNotKeepItFromBeingSent() async throws {
        let f = try FleetFixture()
        defer { f.close() }
        let onB = RecordingLink()
        f.b.connected("bus-12", source: "trk", link: onB)
        f.settle()
        f.bus.hold()
        let x = try f.submit(at: f.a)
        // The client polls through a balancer and reaches B first: the read takes it in.
        #expect(f.b.command(x.id) != nil)
        #expect(await Poll.until { onB.ids == [x.id] })
        f.bus.release()
        f.settle()
        #expect(onB.ids == [x.id])
    }

    @Test func aLateEchoOfAnOwnWriteIsNotTakenForNews() async throws {
        let bus = SharedCommandBus()
        let view = bus.view()
        let board = try FleetFixture.board("gw-a", view, ManualClock())
        defer { board.close() }
        let link = RecordingLink()
        board.connected("bus-12", source: "trk", link: link)
        let x = try board.submit(CommandRequest(device: "bus-12", type: .positionNow, submittedBy: "ops"))
        #expect(await Poll.until { link.ids == [x.id] })
        // The create's echo, arriving after the `sent` write: an older version.
        view.deliver(.command(x))
        _ = try board.submit(CommandRequest(device: "bus-12", type: .reboot, submittedBy: "ops"))
        for _ in 0..<3 { board.sweep() }
        #expect(link.ids == [x.id], "sent again while in flight: \(link.ids)")
        #expect(board.command(x.id)?.status == .sent)
    }
}
