import GatewayCore
import Locking
import SystemIO
import TrackerProtocols

/// One device's TCP connection: its codec, identity, answers owed, the command in flight and why
/// it is not read. Loop thread only (``send(_:)`` hops there).
final class DeviceConnection: TCPConnectionDelegate, CommandLink, @unchecked Sendable {
    /// Why a connection is not being read; it is read again when no reason is left.
    struct Holds: OptionSet {
        let rawValue: UInt8
        /// `max_unacked` positions wait for their commit.
        static let window = Holds(rawValue: 1)
        /// The source's inbox is full.
        static let inbox = Holds(rawValue: 2)
        /// The peer does not take its answers.
        static let writes = Holds(rawValue: 4)
        /// A registration or authentication waits for the source's decision.
        static let admission = Holds(rawValue: 8)
    }

    /// An answer owed once the positions of its frame are handled.
    private struct OwedAnswer {
        var sequence: UInt64
        var bytes: [UInt8]?
        var positions: Int
        var since: UInt64
        var handled = false
    }

    let connection: TCPConnection
    /// Strong: a connection closing after its source stopped still reports to it; the
    /// listener forgets the connection once it is closed.
    let listener: TrackerListener
    private var codec: any TrackerCodec
    /// Bytes of an incomplete frame, kept until the rest arrives.
    private var pending: [UInt8] = []
    /// The device, once identified.
    private(set) var entry: DeviceEntry?
    /// `entry != nil`, read by the sweep without copying the entry.
    private(set) var identified = false
    private(set) var identifier: String?
    /// The device authenticated through the source's admissions (not only named by a frame).
    private var authenticated = false
    let acceptedAt: UInt64
    private(set) var lastInput: UInt64
    /// Whether the codec was flushed since the last input.
    private(set) var flushed = true
    /// The codec holds what has a time of its own (a split message): it is called each quiet second.
    private(set) var wantsIdle = false
    private var outstanding = 0
    private var holds: Holds = []
    private var owed: [OwedAnswer] = []
    private var nextSequence: UInt64 = 0
    private var closing = false
    /// The command sent and not yet answered, with the bytes that went out (its reply is matched to them).
    private var inFlight: (id: String, sent: [UInt8])?
    /// Commands handed to ``send(_:)`` whose bytes the loop has not written yet (the command
    /// center may take them back meanwhile: ``withdraw(_:)``).
    private let unsent = Locked<Set<String>>([])

    init(connection: TCPConnection, listener: TrackerListener, codec: any TrackerCodec, now: UInt64) {
        self.connection = connection
        self.listener = listener
        self.codec = codec
        acceptedAt = now
        lastInput = now
        self.codec.limitPieces { [weak self] in self?.pieceRoom($0) ?? .none }
    }

    /// The room of `deviceID`'s split packets: all of it once the connection authenticated as
    /// the device (or identified it, for a protocol without admissions); none while admissions
    /// want it authenticated first; else a share (a connection taking frames from whoever it is
    /// told it is). Loop thread (called while decoding).
    private func pieceRoom(_ deviceID: String) -> TrackerPieceRoom {
        if deviceID == identifier && (authenticated || (identified && listener.admissions == nil)) { return .all }
        if let admissions = listener.admissions, !admissions.admitsUnauthenticated(deviceID, overDatagrams: false) { return .none }
        return .share
    }

    private var stats: ComponentStats { listener.context.stats }

    // MARK: - Input

    func connection(_ connection: TCPConnection, received bytes: UnsafeRawBufferPointer) {
        lastInput = listener.loop.now
        flushed = false
        if pending.isEmpty {
            let used = process(bytes)
            if used < bytes.count && !closing { pending.append(contentsOf: bytes[used...]) }
        } else {
            pending.append(contentsOf: bytes)
            let used = pending.withUnsafeBytes { process($0) }
            if closing { pending = [] } else { pending.removeFirst(min(used, pending.count)) }
        }
    }

    /// Decodes every whole frame at the start of `bytes`; returns the bytes used.
    private func process(_ bytes: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        let now = listener.context.clock.now()
        // A frame waiting for an admission's decision stops the decoding: what follows it is
        // judged after (it is kept in `pending` and decoded once the decision is in).
        while offset < bytes.count && !closing && !holds.contains(.admission) {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            switch codec.decode(rest, now: now) {
            case .needMore:
                return offset
            case .message(let message, let consumed):
                offset += min(max(1, consumed), rest.count)
                stats.count("frames.good")
                handle(message)
            case .invalid(let error, let consumed, let close):
                offset += min(max(1, consumed), rest.count)
                stats.count("frames.bad.\(error.reason)")
                listener.context.logger.debug("\(connection.peer): bad frame: \(error)")
                if close {
                    self.close(reason: "bad frame (\(error.reason)); the device reconnects and resends")
                    return bytes.count
                }
            }
        }
        return offset
    }

    private func handle(_ message: TrackerMessage) {
        switch message {
        case .identification(let identifier, let accepted, let refused):
            if identify(identifier) {
                write(accepted)
            } else {
                if let refused { connection.write(codec.outgoing(refused)) }
                close(reason: nil, afterWrites: true)
            }
        case .records(var records):
            if let kind = records.kind { stats.count("messages.\(kind)") }
            if records.undecoded > 0 { stats.count("positions.undecoded", by: records.undecoded) }
            if let id = records.deviceID, !acceptsFrames(naming: id) { return }
            if let reply = records.reply { replied(reply) }
            guard let entry else {
                stats.count("frames.unidentified")
                close(reason: "positions before the device identified itself")
                return
            }
            listener.stamp.stamp(&records.positions, as: entry)
            deliver(records.positions, answer: records.answer)
        case .control(let kind, let deviceID, let answer):
            stats.count("messages.\(kind)")
            // Under admissions a control from a device not authenticated here is answered
            // (a heartbeat costs nothing) but identifies nobody.
            if let id = deviceID, entry == nil || id != identifier {
                if let admissions = listener.admissions, !admissions.admitsUnauthenticated(id, overDatagrams: false) {
                    stats.count("frames.unauthenticated")
                } else if !identify(id) {
                    close(reason: nil)
                    return
                }
            }
            if let answer { write(answer) }
        case .admission(let admission):
            stats.count("messages.\(admission.kind)")
            admit(admission)
        case .commandReply(let kind, let deviceID, let reply, let answer):
            stats.count("messages.\(kind)")
            if let id = deviceID, !acceptsFrames(naming: id) { return }
            replied(reply)
            if let answer { write(answer) }
        }
    }

    // MARK: - Commands

    /// Sends a command the command center marked sent (any thread: hops to the loop).
    func send(_ command: DeviceCommand) {
        unsent.withLock { _ = $0.insert(command.id) }
        listener.loop.execute { [self] in
            // Taken back (cancelled or expired meanwhile): none of it goes.
            guard unsent.withLock({ $0.remove(command.id) }) != nil, !closing else { return }
            guard let bytes = codec.encode(command, now: listener.context.clock.now()) else {
                listener.commands?.answered(command.id, outcome: .failed("the \(listener.protocolName) protocol cannot carry \(command.type.rawValue) here"))
                return
            }
            let wire = codec.outgoing(bytes)
            connection.write(wire)
            stats.count("commands.written")
            if codec.awaitsReply(to: command) {
                inFlight = (command.id, wire)
            } else {
                // The protocol has no answer for it (GPS103): handed over is all there is to know.
                listener.commands?.answered(command.id, outcome: .delivered)
            }
            checkWrites()
        }
    }

    func withdraw(_ id: String) -> Bool {
        unsent.withLock { $0.remove(id) } != nil
    }

    /// A reply from the device: the command in flight's outcome, or counted when it answers none.
    private func replied(_ reply: TrackerCommandReply) {
        guard let (id, sent) = inFlight, let outcome = codec.outcome(of: reply, sent: sent) else {
            stats.count("commands.unmatched_replies")
            return
        }
        inFlight = nil
        listener.commands?.answered(id, outcome: outcome)
    }

    /// Tells the command center who is on this connection now.
    private func becameDevice(_ entry: DeviceEntry, previous: DeviceEntry?) {
        guard let commands = listener.commands, previous?.name != entry.name else { return }
        if let previous { commands.disconnected(previous.name, link: self) }
        inFlight = nil
        commands.connected(entry.name, source: listener.context.id, link: self)
    }

    /// Whether frames naming `id` are taken: from the device authenticated on this connection;
    /// else, unless admissions require authentication, from whoever the directory accepts
    /// (the connection then becomes that device's). Closes the connection when not.
    private func acceptsFrames(naming id: String) -> Bool {
        if entry != nil && id == identifier { return true }
        if let admissions = listener.admissions, !admissions.admitsUnauthenticated(id, overDatagrams: false) {
            if authenticated {
                stats.count("frames.other_device")
                close(reason: "a frame of device \(id) on the connection authenticated as \(identifier ?? "")")
            } else {
                stats.count("frames.unauthenticated")
                close(reason: "device \(id) sent positions before it authenticated; it reconnects, authenticates and resends them")
            }
            return false
        }
        guard identify(id) else {
            close(reason: nil)
            return false
        }
        return true
    }

    /// Hands a registration, authentication or deregistration to the source's admissions and
    /// stops reading until it is decided, so nothing the device sends after it is judged before it.
    private func admit(_ admission: TrackerAdmission) {
        guard let admissions = listener.admissions else {
            stats.count("frames.unexpected_admission")
            return
        }
        let entry = listener.resolve(admission.deviceID, peer: connection.peer)
        hold(.admission)
        let loop = listener.loop
        let fromDevice = authenticated && admission.deviceID == identifier
        admissions.decide(admission, entry: entry, authenticated: fromDevice) { [self] verdict in
            loop.execute { self.admitted(admission, verdict, entry: entry) }
        }
    }

    private func admitted(_ admission: TrackerAdmission, _ verdict: TrackerAdmissionVerdict, entry: DeviceEntry?) {
        stats.count("admissions.\(Self.word(verdict))")
        guard !closing else { return }
        let answer = codec.answer(admission, verdict)
        switch verdict {
        case .authenticated:
            if let entry {
                let previous = self.entry
                self.entry = entry
                becameDevice(entry, previous: previous)
                identifier = admission.deviceID
                identified = true
                authenticated = true
            }
        case .deregistered where admission.deviceID == identifier:
            // Its code is gone: nothing more is taken until it registers and authenticates again.
            if let gone = self.entry { listener.commands?.disconnected(gone.name, link: self) }
            self.entry = nil
            identifier = nil
            identified = false
            authenticated = false
        case .refused(.unknownDevice):
            if let answer { connection.write(codec.outgoing(answer)) }
            close(reason: nil, afterWrites: true)
            return
        default:
            break
        }
        if let answer { write(answer) }
        release(.admission)
        if !pending.isEmpty && !holds.contains(.admission) && !closing {
            let used = pending.withUnsafeBytes { process($0) }
            if closing { pending = [] } else { pending.removeFirst(min(used, pending.count)) }
        }
    }

    /// A verdict as a metric label word.
    static func word(_ verdict: TrackerAdmissionVerdict) -> String {
        switch verdict {
        case .registered: "registered"
        case .authenticated: "authenticated"
        case .deregistered: "deregistered"
        case .refused(.unknownDevice): "refused_unknown"
        case .refused(.alreadyRegistered): "refused_already_registered"
        case .refused(.wrongCode): "refused_code"
        case .refused(.notAuthenticated): "refused_unauthenticated"
        case .refused(.unavailable): "unavailable"
        }
    }

    /// Looks the device up; true when it may send.
    func identify(_ identifier: String) -> Bool {
        guard let entry = listener.resolve(identifier, peer: connection.peer) else { return false }
        let previous = self.entry
        self.entry = entry
        becameDevice(entry, previous: previous)
        self.identifier = identifier
        identified = true
        return true
    }

    /// Hands positions to the inbox; `answer` is written once they are handled.
    private func deliver(_ positions: [Position], answer: [UInt8]?) {
        // A stream protocol (NMEA) hands over whatever it has after each read, often nothing.
        if positions.isEmpty && answer == nil { return }
        let sequence = nextSequence
        nextSequence += 1
        owed.append(OwedAnswer(sequence: sequence, bytes: answer, positions: positions.count, since: listener.loop.now))
        outstanding += positions.count
        let loop = listener.loop
        let accepted = listener.inbox.put(DeviceInbox.Delivery(positions: positions) { [self] in
            loop.execute { self.handled(sequence) }
        })
        guard accepted else {
            close(reason: nil)
            return
        }
        if outstanding >= listener.configuration.maxUnacked { hold(.window) }
        if listener.inbox.isFull { listener.holdForInbox(self) }
    }

    /// The positions of answer `sequence` were handled end to end: write every answer now due,
    /// in order.
    private func handled(_ sequence: UInt64) {
        listener.loop.assertOnLoop()
        guard let first = owed.first, sequence >= first.sequence else { return }
        let index = Int(sequence - first.sequence)
        guard index < owed.count else { return }
        owed[index].handled = true
        let now = listener.loop.now
        var released = 0
        var done = 0
        while done < owed.count && owed[done].handled {
            let answer = owed[done]
            released += answer.positions
            if let bytes = answer.bytes, !closing {
                connection.write(codec.outgoing(bytes))
                stats.count("acks.sent")
                stats.count("ack_latency_ms.sum", by: Int(now &- answer.since))
            }
            done += 1
        }
        owed.removeFirst(done)
        outstanding -= released
        if outstanding < listener.configuration.maxUnacked { release(.window) }
        checkWrites()
    }

    /// Positions an NMEA epoch held past a quiet second, and what the codec has to say then
    /// (a request for the missing packets of a split message); called each quiet second while
    /// the codec asks for it (``TrackerIdleOutput/callAgain``).
    func flushIdle() {
        flushed = true
        let now = listener.context.clock.now()
        let idle = codec.idle(now: now, ending: false)
        wantsIdle = idle.callAgain
        for key in idle.counts { stats.count(key) }
        for answer in idle.answers where !closing { write(answer) }
        var positions = codec.flush(now: now)
        guard !positions.isEmpty, let entry else { return }
        listener.stamp.stamp(&positions, as: entry)
        deliver(positions, answer: nil)
    }

    // MARK: - Output and holds

    /// Writes an answer that is due at once.
    private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        connection.write(codec.outgoing(bytes))
        stats.count("answers.immediate")
        checkWrites()
    }

    private func checkWrites() {
        if connection.queuedWriteBytes > TCPConnection.highWatermark { hold(.writes) }
    }

    func connectionWritable(_ connection: TCPConnection) { release(.writes) }

    func hold(_ reason: Holds) {
        holds.insert(reason)
        connection.stopReading()
    }

    func release(_ reason: Holds) {
        holds.remove(reason)
        if holds.isEmpty && !closing { connection.startReading() }
    }

    // MARK: - End

    func connectionEnded(_ connection: TCPConnection, error: SystemError?) {
        if let error { listener.context.logger.debug("\(connection.peer): \(error)") }
        for key in codec.idle(now: listener.context.clock.now(), ending: true).counts { stats.count(key) }
        // What an NMEA epoch held is complete now; tracker codecs hold nothing.
        if !closing, let entry {
            var positions = codec.flush(now: listener.context.clock.now())
            if !positions.isEmpty {
                listener.stamp.stamp(&positions, as: entry)
                deliver(positions, answer: nil)
            }
        }
        closing = true
    }

    /// Closes the connection (logged at debug level with `reason`); answers still owed are
    /// never written.
    func close(reason: String?, afterWrites: Bool = false) {
        if let reason { listener.context.logger.debug("\(connection.peer)\(identifier.map { " (\($0))" } ?? ""): closing: \(reason)") }
        // `pending` may be the buffer being decoded right now: `connection(_:received:)` drops it.
        closing = true
        connection.close(afterWrites: afterWrites)
    }

    func connectionClosed(_ connection: TCPConnection) {
        closing = true
        if let entry { listener.commands?.disconnected(entry.name, link: self) }
        listener.removed(self)
    }
}
