// One of the two Swift files that talk to libmosquitto (the mqtt sink and the mqtt source both use
// them): this one sets a client up, publishes and takes its callbacks; MQTTNetworkThread.swift runs
// the network thread that drives it (split to keep each file under 500 lines).
import CMosquitto
import Foundation
import GatewayCore
import Locking
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// How a publish ended, as the broker (or the connection) said.
public enum MQTTPublishOutcome: Sendable, Equatable {
    /// PUBACK (QoS 1), PUBCOMP (QoS 2), or written to the socket (QoS 0).
    case accepted
    /// An MQTT 5 acknowledgement with a failure reason code: sending it again gets the same answer.
    case rejected(String)
    /// The connection was closed for good before the broker answered.
    case abandoned(String)
}

/// A failure of the library that the caller can retry later.
public struct MQTTError: Error, CustomStringConvertible {
    public var description: String
    /// True when the message itself can never be published (a topic libmosquitto rejects as
    /// invalid or malformed UTF-8, a packet over the broker's maximum): retrying cannot help.
    public var isPermanent = false
}

/// One libmosquitto client with its own network thread.
///
/// Publishing and subscribing both go through it; neither the sink nor the source sees a C type.
/// The thread connects, and on any failure waits a capped, jittered backoff and connects again,
/// forever, until ``close()``. Publishing is allowed from any thread while connected; each
/// publish's `done` runs once, on the network thread, when the broker acknowledged it. Messages in
/// flight when a connection drops stay in libmosquitto, which sends them again (same message id,
/// DUP set) after the next CONNACK, so their `done` still comes — from the broker's answer to the
/// re-sent message.
///
/// The network thread drives libmosquitto itself once connected (`mosquitto_loop_read`,
/// `mosquitto_loop_write`, `mosquitto_loop_misc` around a `poll` of the socket and a ``Wakeup``)
/// instead of calling `mosquitto_loop`, and it is the only thread that calls into the library:
///
///     publish (any thread) ──▶ [outgoing, in order] ──wake once per burst──▶ network thread:
///         hand over while fewer than max_inflight are unacknowledged (mosquitto_publish, queued)
///         ──▶ one mosquitto_loop_write for the burst ──▶ poll ──▶ mosquitto_loop_read: every PUBACK
///         that arrived (each runs its `done`) ──▶ hand over again ...
///
/// What that saves per message, against `mosquitto_loop` on its own thread with publishes from
/// another (strace, Plugins/MQTTOutput/README.md): the `select` and the wake-up byte read per
/// PUBACK (`mosquitto_loop_read` stops after one packet whenever `errno` is left at `EAGAIN`, which
/// it nearly always is; we clear it first, so one call reads every PUBACK waiting), and the library's
/// locks taken from two threads. libmosquitto still writes each packet with its own `write(2)`,
/// reads each PUBACK with three `read(2)`s, and writes a wake-up byte to its internal socket pair
/// per packet queued; its API has no way around those.
///
/// Subscribing: ``subscribe(_:qos:handler:)`` before ``start()``; the filters are subscribed after
/// every CONNACK (a resumed session keeps them anyway; a lost one gets them back). The handler runs
/// on the network thread, one message at a time. For a QoS 1 message libmosquitto has already
/// queued the PUBACK when the handler runs, but the network thread writes it only after the
/// handler returns: a handler that blocks until the message is handled keeps the PUBACK back
/// until then, and ``MQTTMessageDisposition/dropConnection`` keeps it from ever being written.
public final class MQTTConnection: @unchecked Sendable {
    // @unchecked: `handle` and `inFlight` are used by the network thread only (and by `close()`
    // once that thread has ended); every field other threads touch is in `state`.
    let handle: OpaquePointer
    let options: MQTTConnectionOptions
    let logger: Logger
    let stats: ComponentStats
    /// Connect properties (MQTT 5 session expiry); freed in deinit.
    var connectProperties: OpaquePointer?
    /// Wakes the network thread: a burst of publishes to hand over, or ``close()``.
    let wakeup: Wakeup
    /// `done` of each message handed to libmosquitto and not yet acknowledged, by message id.
    /// Network thread only.
    var inFlight: [Int32: @Sendable (MQTTPublishOutcome) -> Void] = [:]
    /// Messages handed to libmosquitto at most, unacknowledged: `max_inflight`, or the broker's
    /// receive maximum when that is lower (libmosquitto would queue the rest itself). Network thread only.
    var sendLimit: Int

    /// A message waiting for the network thread to hand it to libmosquitto.
    struct Outgoing {
        var topic: String
        var payload: [UInt8]
        var qos: Int
        var retain: Bool
        var done: @Sendable (MQTTPublishOutcome) -> Void
    }

    struct State {
        var connected = false
        var stopping = false
        var threadDone = false
        var started = false
        var finished: [CheckedContinuation<Void, Never>] = []
        /// Published and not yet handed to libmosquitto, in order from `outgoingHead`.
        var outgoing: [Outgoing] = []
        var outgoingHead = 0
        /// A wake-up is on its way to the network thread: publishes in the same burst need not send one.
        var wakePosted = false
        /// The last error libmosquitto logged (OpenSSL's reason for a failed handshake).
        var lastLibraryError: String?
        /// Why the last CONNACK refused us.
        var refusal: String?
        var offlineMid: Int32?
        var offlineAcked = false
        /// Filters subscribed after every CONNACK, and who gets the messages.
        var subscription: (filters: [String], qos: Int, handler: @Sendable (MQTTMessage) -> MQTTMessageDisposition)?
    }
    let state = Locked(State())

    /// `mosquitto_lib_init` must run once per process, before the first client.
    static let libraryReady: Bool = {
        // libmosquitto writes with write(2): a write to a socket the peer (or dropConnection) shut
        // must come back as EPIPE, not kill the process with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        return mosquitto_lib_init() == MOSQ_ERR_SUCCESS.rawValue
    }()

    public init(options: MQTTConnectionOptions, logger: Logger, stats: ComponentStats) throws {
        guard MQTTConnection.libraryReady else { throw MQTTError(description: "libmosquitto failed to initialise") }
        guard let h = mosquitto_new(options.clientID, options.cleanSession, nil) else {
            throw MQTTError(description: "mosquitto_new failed for client id \"\(options.clientID)\": \(String(cString: strerror(errno)))")
        }
        handle = h
        self.options = options
        self.logger = logger
        self.stats = stats
        sendLimit = max(1, options.maxInflight)
        do {
            wakeup = try Wakeup()
            try configure()
        } catch {
            mosquitto_destroy(h)
            throw error
        }
    }

    deinit {
        mosquitto_destroy(handle)
        if connectProperties != nil { mosquitto_property_free_all(&connectProperties) }
    }

    /// Every libmosquitto return code goes through here.
    @discardableResult
    func check(_ rc: Int32, _ what: String) throws -> Int32 {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(description: "\(what): \(MQTTConnection.describe(rc))") }
        return rc
    }

    static func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return String(cString: strerror(errno)) }
        // libmosquitto 2.0 has no text for it ("Unknown error.").
        if rc == MOSQ_ERR_KEEPALIVE.rawValue { return "the broker did not answer within the keepalive" }
        return String(cString: mosquitto_strerror(rc))
    }

    func configure() throws {
        let h = handle
        let version = options.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, version), "protocol version")
        // Our own thread runs the loop. Threaded mode makes mosquitto_publish queue the packet
        // instead of writing it at once, so a burst goes out in one mosquitto_loop_write, after
        // each message's `done` is stored (a QoS 0 message is "acknowledged" by its write).
        try check(mosquitto_threaded_set(h, true), "threaded mode")
        try check(mosquitto_int_option(h, MOSQ_OPT_SEND_MAXIMUM, Int32(clamping: options.maxInflight)), "max_inflight")
        // Positions are small: do not let Nagle hold a PUBLISH back waiting for more bytes.
        try check(mosquitto_int_option(h, MOSQ_OPT_TCP_NODELAY, 1), "tcp nodelay")
        if let user = options.username {
            try check(mosquitto_username_pw_set(h, user, options.password), "username/password")
        }
        if let tls = options.tls {
            if tls.caFile == nil {
                // No CA file: trust the system's certificate store, as a browser would.
                try check(mosquitto_int_option(h, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "tls system CAs")
            } else {
                try check(mosquitto_tls_set(h, tls.caFile, nil, tls.certFile, tls.keyFile, nil), "tls")
            }
            if !tls.verify {
                try check(mosquitto_tls_opts_set(h, 0, nil, nil), "tls verify off")
                try check(mosquitto_tls_insecure_set(h, true), "tls hostname check off")
            }
        }
        if let will = options.will {
            _ = try will.payload.withUnsafeBytes { p in
                try check(mosquitto_will_set_v5(h, will.topic, Int32(p.count), p.baseAddress, Int32(will.qos), will.retain, nil), "will")
            }
        }
        if options.protocolVersion == .v5 && !options.cleanSession {
            // MQTT 5 ends a session at disconnect unless it has an expiry: the longest one keeps
            // the 3.1.1 meaning of clean_session=false (the broker may cap it).
            try check(mosquitto_property_add_int32(&connectProperties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), UInt32.max), "session expiry")
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        mosquitto_user_data_set(h, me)
        mosquitto_connect_v5_callback_set(h) { _, obj, rc, flags, properties in
            guard let obj else { return }
            // MQTT 5: the broker may accept fewer unacknowledged messages than max_inflight.
            var receiveMaximum: UInt16 = 0
            let limited = properties.map { mosquitto_property_read_int16($0, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), &receiveMaximum, false) != nil } ?? false
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue()
                .didConnect(rc: rc, sessionPresent: flags & 1 != 0, receiveMaximum: limited ? Int(receiveMaximum) : nil)
        }
        mosquitto_disconnect_v5_callback_set(h) { _, obj, rc, _ in
            guard let obj else { return }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().didDisconnect(rc: rc)
        }
        mosquitto_publish_v5_callback_set(h) { _, obj, mid, reason, _ in
            guard let obj else { return }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().didPublish(mid: mid, reason: reason)
        }
        mosquitto_message_v5_callback_set(h) { _, obj, message, _ in
            guard let obj, let message else { return }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().didReceive(message.pointee)
        }
        mosquitto_subscribe_v5_callback_set(h) { _, obj, _, count, granted, _ in
            guard let obj, let granted else { return }
            let codes = (0..<Int(max(0, count))).map { granted[$0] }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().didSubscribe(granted: codes)
        }
        captureLibraryLog(true)
    }

    /// libmosquitto formats a log line (vsnprintf into a fresh buffer) for every packet it sends
    /// or receives while a log callback is set — two per published message. Only its errors while
    /// connecting are wanted (OpenSSL's reason for a failed handshake), so the callback is set
    /// before each connection attempt and cleared at the CONNACK.
    func captureLibraryLog(_ on: Bool) {
        guard on else { return mosquitto_log_callback_set(handle, nil) }
        mosquitto_log_callback_set(handle) { _, obj, level, text in
            guard let obj, let text, level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0 else { return }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().libraryLogged(String(cString: text))
        }
    }

    // MARK: - Callbacks (network thread)

    func didConnect(rc: Int32, sessionPresent: Bool, receiveMaximum: Int?) {
        guard rc == 0 else {
            let reason = options.protocolVersion == .v5 ? String(cString: mosquitto_reason_string(rc)) : String(cString: mosquitto_connack_string(rc))
            state.withLock { $0.refusal = "the broker refused the connection: \(reason)" }
            return
        }
        state.withLock { $0.connected = true; $0.refusal = nil; $0.lastLibraryError = nil }
        sendLimit = max(1, min(options.maxInflight, receiveMaximum ?? Int.max))
        captureLibraryLog(false)
        stats.count("mqtt.connects")
        // mosquitto advertises its max_inflight_messages (20 unless configured): worth knowing when
        // the sink is slower than expected.
        // A subscriber (the source) publishes nothing but its status and has no max_inflight option.
        let publisher = state.withLock { $0.subscription == nil }
        let lowered = publisher && sendLimit < options.maxInflight ? "; the broker's receive maximum \(sendLimit) lowers max_inflight \(options.maxInflight)" : ""
        logger.info("connected to \(options.displayURL) as \"\(options.clientID)\"\(sessionPresent ? " (session resumed)" : "")\(lowered)")
        if let online = options.online {
            var mid: Int32 = 0
            let rc = online.payload.withUnsafeBytes { p in
                mosquitto_publish_v5(handle, &mid, online.topic, Int32(p.count), p.baseAddress, Int32(online.qos), online.retain, nil)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { logger.warning("status message not sent: \(MQTTConnection.describe(rc))") }
        }
        if let subscription = state.withLock({ $0.subscription }) { subscribeNow(subscription.filters, qos: subscription.qos) }
    }

    func subscribeNow(_ filters: [String], qos: Int) {
        // MQTT 5: retained messages only for a subscription the session did not have yet, so a
        // resumed session does not get every device's last retained fix again at each reconnect.
        let subscribeOptions = options.protocolVersion == .v5 ? Int32(MQTT_SUB_OPT_SEND_RETAIN_NEW.rawValue) : 0
        var copies = filters.map { strdup($0) }
        defer { for c in copies { free(c) } }
        var mid: Int32 = 0
        let rc = copies.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafeMutablePointer<CChar>?.self, capacity: buffer.count) { p in
                mosquitto_subscribe_multiple(handle, &mid, Int32(buffer.count), p, Int32(qos), subscribeOptions, nil)
            }
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            logger.error("cannot subscribe to \(filters.joined(separator: ", ")): \(MQTTConnection.describe(rc))")
        }
    }

    func didSubscribe(granted: [Int32]) {
        guard let subscription = state.withLock({ $0.subscription }) else { return }
        for (i, code) in granted.enumerated() where i < subscription.filters.count {
            let filter = subscription.filters[i]
            if code >= 0x80 {
                stats.count("mqtt.subscribe_refused")
                logger.error("the broker refused the subscription to \(filter) (reason code \(code)); check the broker's ACL for user \(options.username ?? "(anonymous)")")
            } else if Int(code) < subscription.qos {
                logger.warning("the broker granted QoS \(code) for \(filter), not \(subscription.qos): messages published while locgate is away are not kept for it")
            }
        }
        logger.info("subscribed to \(subscription.filters.joined(separator: ", "))")
    }

    func didReceive(_ m: mosquitto_message) {
        guard let subscription = state.withLock({ $0.subscription }) else { return }
        let topic = m.topic.map { String(cString: $0) } ?? ""
        let count = Int(max(0, m.payloadlen))
        let payload = count > 0 && m.payload != nil ? Array(UnsafeRawBufferPointer(start: m.payload, count: count)) : []
        let message = MQTTMessage(topic: topic, payload: payload, qos: Int(m.qos), retained: m.retain)
        if subscription.handler(message) == .dropConnection {
            // The PUBACK is queued in libmosquitto and goes out when the loop next writes: shut the
            // socket first, so the write fails and the broker keeps the message for the next session.
            let fd = mosquitto_socket(handle)
            if fd >= 0 { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    func didDisconnect(rc: Int32) {
        let was = state.withLock { s -> Bool in defer { s.connected = false }; return s.connected }
        if was && rc != 0 { stats.count("mqtt.disconnects") }
    }

    func didPublish(mid: Int32, reason: Int32) {
        // An id we did not hand over is the online or offline status (or stale): ignored, so it can
        // never be taken for a later message that reuses the id after the 16-bit ids wrap.
        guard let done = inFlight.removeValue(forKey: mid) else {
            state.withLock { s in if s.offlineMid == mid { s.offlineAcked = true } }
            return
        }
        // `done` may take locks and wake threads; a syscall failing with EAGAIN there (a futex)
        // would leave errno at EAGAIN, and the mosquitto_loop_read that called us would stop
        // after this packet instead of reading every PUBACK waiting.
        let savedErrno = errno
        defer { errno = savedErrno }
        // MQTT 5 reason codes below 0x80 are successes (0x10: accepted, no subscribers).
        done(reason < 0x80 ? .accepted
            : .rejected("the broker refused the message: \(String(cString: mosquitto_reason_string(reason))) (reason code \(reason))"))
    }

    func libraryLogged(_ text: String) {
        state.withLock { $0.lastLibraryError = text }
    }

    // MARK: - Subscribing

    /// Subscribes to `filters` at `qos` after every CONNACK; `handler` gets each message on the
    /// network thread and may block (the PUBACK of a QoS 1 message waits for it). Call before ``start()``.
    public func subscribe(_ filters: [String], qos: Int, handler: @escaping @Sendable (MQTTMessage) -> MQTTMessageDisposition) {
        state.withLock { $0.subscription = (filters, qos, handler) }
    }

    // MARK: - Publishing (any thread)

    /// True between a CONNACK and the next disconnect.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// Queues one message for the network thread, which hands it to libmosquitto in order; `done`
    /// runs once with the broker's answer. Throws when not connected or when the message can never
    /// be published (``MQTTError/isPermanent``).
    public func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool, done: @escaping @Sendable (MQTTPublishOutcome) -> Void) throws {
        // The checks mosquitto_publish makes that do not depend on the broker, here, so the caller
        // learns at once; the others (the broker's maximum QoS and packet size) come as `.rejected`.
        var rc = MOSQ_ERR_SUCCESS.rawValue
        if !(0...2).contains(qos) || topic.isEmpty {
            rc = MOSQ_ERR_INVAL.rawValue
        } else if payload.count > Int(MQTT_MAX_PAYLOAD) {
            rc = MOSQ_ERR_PAYLOAD_SIZE.rawValue
        } else {
            rc = topic.utf8CString.withUnsafeBufferPointer { t in
                let length = t.count - 1
                if mosquitto_validate_utf8(t.baseAddress, Int32(clamping: length)) != MOSQ_ERR_SUCCESS.rawValue { return MOSQ_ERR_MALFORMED_UTF8.rawValue }
                return mosquitto_pub_topic_check2(t.baseAddress, length)
            }
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError(description: "publish to \(topic): \(MQTTConnection.describe(rc))", isPermanent: true)
        }
        let message = Outgoing(topic: topic, payload: payload, qos: qos, retain: retain, done: done)
        let wake = try state.withLock { s throws(MQTTError) -> Bool in
            guard s.connected && !s.stopping else { throw MQTTError(description: "not connected to \(options.displayURL)") }
            s.outgoing.append(message)
            defer { s.wakePosted = true }
            return !s.wakePosted
        }
        if wake { wakeup.signal() }
    }

    /// Hands queued messages to libmosquitto while fewer than `sendLimit` are unacknowledged
    /// (network thread). They are queued in the library, written by the next `mosquitto_loop_write`.
    /// Returns how many were handed over.
    @discardableResult
    func handOver() -> Int {
        let room = sendLimit - inFlight.count
        let batch = state.withLock { s -> ArraySlice<Outgoing> in
            s.wakePosted = false
            let end = s.outgoingHead + min(max(0, room), s.outgoing.count - s.outgoingHead)
            let taken = s.outgoing[s.outgoingHead..<end]
            s.outgoingHead = end
            if s.outgoingHead == s.outgoing.count {
                s.outgoing.removeAll(keepingCapacity: true)
                s.outgoingHead = 0
            } else if s.outgoingHead > 4096 && s.outgoingHead * 2 > s.outgoing.count {
                s.outgoing.removeFirst(s.outgoingHead)
                s.outgoingHead = 0
            }
            return taken
        }
        var handed = 0
        for m in batch {
            var mid: Int32 = 0
            let rc = m.payload.withUnsafeBytes { p in
                mosquitto_publish_v5(handle, &mid, m.topic, Int32(p.count), p.baseAddress, Int32(m.qos), m.retain, nil)
            }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                let why = "publish to \(m.topic): \(MQTTConnection.describe(rc))"
                let permanent = [MOSQ_ERR_INVAL, MOSQ_ERR_MALFORMED_UTF8, MOSQ_ERR_OVERSIZE_PACKET, MOSQ_ERR_PAYLOAD_SIZE, MOSQ_ERR_QOS_NOT_SUPPORTED]
                    .contains { $0.rawValue == rc }
                m.done(permanent ? .rejected(why) : .abandoned(why))
                continue
            }
            inFlight[mid] = m.done
            handed += 1
        }
        return handed
    }
}
