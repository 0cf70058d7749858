import GatewayCore
import SystemIO
import TrackerProtocols

/// A listening UDP source (Teltonika over UDP), on the I/O loop's thread.
///
/// Each datagram is one frame that names its device. Its positions go to the inbox and its
/// answer is sent to the datagram's sender once they are handled end to end. UDP cannot slow a
/// sender down: while the inbox is full a datagram is dropped unanswered (counted), and the
/// device sends it again, as it does for any datagram whose answer it did not get.
public final class DatagramListener: @unchecked Sendable {
    // Unchecked Sendable: all state is used on the loop thread only (see EventLoop's rule).
    let loop: EventLoop
    let listen: ListenAddress
    let directory: DeviceDirectory
    let inbox: DeviceInbox
    let context: ComponentContext
    let maxDatagramBytes: Int
    let admissions: (any DeviceAdmissions)?
    private var codec: any TrackerCodec
    private var endpoint: UDPEndpoint?
    private var stamp: PositionStamp
    private var logLimit = LogRateLimit()

    public init(loop: EventLoop, listen: ListenAddress, maxDatagramBytes: Int, directory: DeviceDirectory, inbox: DeviceInbox,
                context: ComponentContext, admissions: (any DeviceAdmissions)? = nil, codec: any TrackerCodec) {
        self.admissions = admissions
        self.loop = loop
        self.listen = listen
        self.maxDatagramBytes = maxDatagramBytes
        self.directory = directory
        self.inbox = inbox
        self.context = context
        self.codec = codec
        stamp = PositionStamp(source: context.id)
        self.codec.limitPieces { [weak self] in self?.pieceRoom($0) ?? .none }
    }

    /// The room of `deviceID`'s split packets: none for a device whose frames are not taken
    /// (unknown, or not registered where admissions want it), else a share, as every device
    /// sends to the one codec. Loop thread (called while decoding).
    private func pieceRoom(_ deviceID: String) -> TrackerPieceRoom {
        if let admissions, !admissions.admitsUnauthenticated(deviceID, overDatagrams: true) { return .none }
        return directory.lookup(deviceID, now: Int64(loop.now)) == nil ? .none : .share
    }

    /// The bound address (with the kernel's port when 0 was configured).
    public private(set) var address: SocketAddress = .unspecified

    /// Binds and starts receiving (loop thread).
    public func start() throws(SystemError) {
        loop.assertOnLoop()
        let endpoint = try loop.bindUDP(host: listen.host, port: listen.port) { [weak self] bytes, sender, truncated in
            self?.received(bytes, from: sender, truncated: truncated)
        }
        self.endpoint = endpoint
        address = endpoint.address
    }

    /// Stops receiving (loop thread); answers still owed are never sent.
    public func stop() {
        loop.assertOnLoop()
        endpoint?.close()
        endpoint = nil
    }

    private func received(_ bytes: UnsafeRawBufferPointer, from sender: SocketAddress, truncated: Bool) {
        let stats = context.stats
        stats.count("datagrams")
        if truncated || bytes.count > maxDatagramBytes {
            stats.count("frames.bad.too_large")
            return
        }
        if inbox.isFull {
            stats.count("datagrams.dropped_busy")
            return
        }
        let now = context.clock.now()
        defer { for key in codec.idle(now: now, ending: false).counts { stats.count(key) } }
        switch codec.decodeLast(bytes, now: now) {
        case .needMore:
            stats.count("frames.bad.length")
        case .invalid(let error, _, _):
            stats.count("frames.bad.\(error.reason)")
            context.logger.debug("\(sender): bad datagram: \(error)")
        case .message(.identification, _):
            // A datagram names its device in every frame; an identification alone needs nothing.
            stats.count("frames.good")
        case .message(.control(let kind, let deviceID, let answer), _):
            stats.count("frames.good")
            stats.count("messages.\(kind)")
            if let deviceID, resolve(deviceID, from: sender) == nil { return }
            if let answer { send(answer, to: sender) }
        case .message(.commandReply(let kind, _, _, _), _):
            // Commands go on TCP connections only: a reply over UDP answers nothing here.
            stats.count("frames.good")
            stats.count("messages.\(kind)")
            stats.count("commands.unmatched_replies")
        case .message(.admission(let admission), _):
            stats.count("frames.good")
            stats.count("messages.\(admission.kind)")
            admit(admission, from: sender)
        case .message(.records(var records), _):
            stats.count("frames.good")
            if let kind = records.kind { stats.count("messages.\(kind)") }
            if records.undecoded > 0 { stats.count("positions.undecoded", by: records.undecoded) }
            guard let deviceID = records.deviceID else {
                stats.count("frames.unidentified")
                return
            }
            if let admissions, !admissions.admitsUnauthenticated(deviceID, overDatagrams: true) {
                // Not registered: unanswered, so the device keeps it until it registers.
                stats.count("frames.unauthenticated")
                return
            }
            guard let entry = resolve(deviceID, from: sender) else { return }
            stamp.stamp(&records.positions, as: entry)
            let answer = records.answer
            let since = loop.now
            inbox.put(DeviceInbox.Delivery(positions: records.positions) { [self] in
                loop.execute { self.handled(answer, to: sender, since: since) }
            })
        }
    }

    /// Sends an answer due at once.
    private func send(_ answer: [UInt8], to sender: SocketAddress) {
        guard let endpoint else { return }
        endpoint.send(codec.outgoing(answer), to: sender)
        context.stats.count("answers.immediate")
    }

    /// A registration or authentication over UDP: decided, then answered to its sender.
    private func admit(_ admission: TrackerAdmission, from sender: SocketAddress) {
        guard let admissions else {
            context.stats.count("frames.unexpected_admission")
            return
        }
        let entry = directory.lookup(admission.deviceID, now: Int64(loop.now))
        if entry == nil { context.stats.count("devices.unknown") }
        // Nothing says who sent a datagram: it never comes from the device authenticated.
        admissions.decide(admission, entry: entry, authenticated: false) { [self] verdict in
            loop.execute {
                self.context.stats.count("admissions.\(DeviceConnection.word(verdict))")
                if let answer = self.codec.answer(admission, verdict) { self.send(answer, to: sender) }
            }
        }
    }

    private func handled(_ answer: [UInt8]?, to sender: SocketAddress, since: UInt64) {
        guard let answer, let endpoint else { return }
        endpoint.send(codec.outgoing(answer), to: sender)
        context.stats.count("acks.sent")
        context.stats.count("ack_latency_ms.sum", by: Int(loop.now &- since))
    }

    private func resolve(_ identifier: String, from sender: SocketAddress) -> DeviceEntry? {
        if let entry = directory.lookup(identifier, now: Int64(loop.now)) { return entry }
        context.stats.count("devices.unknown")
        if let suppressed = logLimit.allow("device \(identifier)", now: Int64(loop.now)) {
            context.logger.warning("refused unknown device \(identifier) from \(sender): add it to devices (or set unknown_devices: \"accept\")" + LogRateLimit.suffix(suppressed))
        }
        return nil
    }

    /// The source's task took what the inbox held (nothing is held back over UDP).
    public func inboxDrained() {}
}
