// The one Swift file that talks to libmosquitto (the mqtt sink and the mqtt source both use it).
import CMosquitto
import Foundation
import GatewayCore
#if canImport(Glibc)
import Glibc
import Locking
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
/// The thread connects, runs `mosquitto_loop`, and on any failure waits a capped, jittered
/// backoff and connects again, forever, until ``close()``. Publishing is allowed from any thread
/// while connected; each publish's `done` runs once, on the network thread, when the broker
/// acknowledged it. Messages in flight when a connection drops stay in libmosquitto, which sends
/// them again (same message id, DUP set) after the next CONNACK, so their `done` still comes — from
/// the broker's answer to the re-sent message.
///
/// Subscribing: ``subscribe(_:qos:handler:)`` before ``start()``; the filters are subscribed after
/// every CONNACK (a resumed session keeps them anyway; a lost one gets them back). The handler runs
/// on the network thread, one message at a time. For a QoS 1 message libmosquitto has already
/// queued the PUBACK when the handler runs, but the network thread writes it only after the
/// handler returns: a handler that blocks until the message is handled keeps the PUBACK back
/// until then, and ``MQTTMessageDisposition/dropConnection`` keeps it from ever being written.
public final class MQTTConnection: @unchecked Sendable {
    // @unchecked: `handle` is used from the network thread and by `publish` from others, which
    // libmosquitto allows once `mosquitto_threaded_set` is on; every Swift field is in `state`.
    private let handle: OpaquePointer
    private let options: MQTTConnectionOptions
    private let logger: Logger
    private let stats: ComponentStats
    /// Connect properties (MQTT 5 session expiry); freed in deinit.
    private var connectProperties: OpaquePointer?
    private let wake = DispatchSemaphore(value: 0)

    private struct State {
        var connected = false
        var stopping = false
        var threadDone = false
        var started = false
        var finished: [CheckedContinuation<Void, Never>] = []
        /// `done` of each publish awaiting its acknowledgement, by message id.
        var pending: [Int32: @Sendable (MQTTPublishOutcome) -> Void] = [:]
        /// Acknowledgements that arrived before `publish` stored its `done` (the network thread can
        /// be faster than the thread that called `mosquitto_publish`).
        var early: [Int32: MQTTPublishOutcome] = [:]
        /// Calls of `publish` between `mosquitto_publish` and storing their `done`: only then can an
        /// acknowledgement be early. An ack for an unknown id at any other time is stale (the
        /// online status, a publish that failed after libmosquitto queued it) and is ignored, so it
        /// can never be taken for a later message that reuses the id after the 16-bit ids wrap.
        var publishing = 0
        /// The last error libmosquitto logged (OpenSSL's reason for a failed handshake).
        var lastLibraryError: String?
        /// Why the last CONNACK refused us.
        var refusal: String?
        var offlineMid: Int32?
        var offlineAcked = false
        /// Filters subscribed after every CONNACK, and who gets the messages.
        var subscription: (filters: [String], qos: Int, handler: @Sendable (MQTTMessage) -> MQTTMessageDisposition)?
    }
    private let state = Locked(State())

    /// `mosquitto_lib_init` must run once per process, before the first client.
    private static let libraryReady: Bool = {
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
        do {
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
    private func check(_ rc: Int32, _ what: String) throws -> Int32 {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(description: "\(what): \(MQTTConnection.describe(rc))") }
        return rc
    }

    private static func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return String(cString: strerror(errno)) }
        return String(cString: mosquitto_strerror(rc))
    }

    private func configure() throws {
        let h = handle
        let version = options.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, version), "protocol version")
        // Our own thread runs mosquitto_loop; publishing from other threads needs the library's locks.
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
        mosquitto_connect_v5_callback_set(h) { _, obj, rc, flags, _ in
            guard let obj else { return }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().didConnect(rc: rc, sessionPresent: flags & 1 != 0)
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
    private func captureLibraryLog(_ on: Bool) {
        guard on else { return mosquitto_log_callback_set(handle, nil) }
        mosquitto_log_callback_set(handle) { _, obj, level, text in
            guard let obj, let text, level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0 else { return }
            Unmanaged<MQTTConnection>.fromOpaque(obj).takeUnretainedValue().libraryLogged(String(cString: text))
        }
    }

    // MARK: - Callbacks (network thread)

    private func didConnect(rc: Int32, sessionPresent: Bool) {
        guard rc == 0 else {
            let reason = options.protocolVersion == .v5 ? String(cString: mosquitto_reason_string(rc)) : String(cString: mosquitto_connack_string(rc))
            state.withLock { $0.refusal = "the broker refused the connection: \(reason)" }
            return
        }
        state.withLock { $0.connected = true; $0.refusal = nil; $0.lastLibraryError = nil }
        captureLibraryLog(false)
        stats.count("mqtt.connects")
        logger.info("connected to \(options.displayURL) as \"\(options.clientID)\"\(sessionPresent ? " (session resumed)" : "")")
        if let online = options.online {
            var mid: Int32 = 0
            let rc = online.payload.withUnsafeBytes { p in
                mosquitto_publish_v5(handle, &mid, online.topic, Int32(p.count), p.baseAddress, Int32(online.qos), online.retain, nil)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue { logger.warning("status message not sent: \(MQTTConnection.describe(rc))") }
        }
        if let subscription = state.withLock({ $0.subscription }) { subscribeNow(subscription.filters, qos: subscription.qos) }
    }

    private func subscribeNow(_ filters: [String], qos: Int) {
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

    private func didSubscribe(granted: [Int32]) {
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

    private func didReceive(_ m: mosquitto_message) {
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

    private func didDisconnect(rc: Int32) {
        let was = state.withLock { s -> Bool in defer { s.connected = false }; return s.connected }
        if was && rc != 0 { stats.count("mqtt.disconnects") }
    }

    private func didPublish(mid: Int32, reason: Int32) {
        // MQTT 5 reason codes below 0x80 are successes (0x10: accepted, no subscribers).
        let outcome: MQTTPublishOutcome = reason < 0x80 ? .accepted
            : .rejected("the broker refused the message: \(String(cString: mosquitto_reason_string(reason))) (reason code \(reason))")
        let done = state.withLock { s -> (@Sendable (MQTTPublishOutcome) -> Void)? in
            if s.offlineMid == mid { s.offlineAcked = true; return nil }
            if let d = s.pending.removeValue(forKey: mid) { return d }
            if s.publishing > 0 { s.early[mid] = outcome }
            return nil
        }
        done?(outcome)
    }

    private func libraryLogged(_ text: String) {
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

    /// Hands one message to libmosquitto; `done` runs once with the broker's answer.
    /// Throws when not connected or when the library refuses it now.
    public func publish(topic: String, payload: [UInt8], qos: Int, retain: Bool, done: @escaping @Sendable (MQTTPublishOutcome) -> Void) throws {
        guard state.withLock({ $0.connected && !$0.stopping }) else { throw MQTTError(description: "not connected to \(options.displayURL)") }
        var mid: Int32 = 0
        state.withLock { $0.publishing += 1 }
        let rc = payload.withUnsafeBytes { p in
            mosquitto_publish_v5(handle, &mid, topic, Int32(p.count), p.baseAddress, Int32(qos), retain, nil)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            state.withLock { s in
                s.publishing -= 1
                if s.publishing == 0 { s.early.removeAll() }
            }
            let permanent = [MOSQ_ERR_INVAL, MOSQ_ERR_MALFORMED_UTF8, MOSQ_ERR_OVERSIZE_PACKET, MOSQ_ERR_PAYLOAD_SIZE, MOSQ_ERR_QOS_NOT_SUPPORTED]
                .contains { $0.rawValue == rc }
            throw MQTTError(description: "publish to \(topic): \(MQTTConnection.describe(rc))", isPermanent: permanent)
        }
        let early = state.withLock { s -> MQTTPublishOutcome? in
            s.publishing -= 1
            let o = s.early.removeValue(forKey: mid)
            if o == nil { s.pending[mid] = done }
            // Whatever else is there belongs to no publish in progress: stale.
            if s.publishing == 0 { s.early.removeAll() }
            return o
        }
        if let early { done(early) }
    }

    // MARK: - The network thread

    /// Starts connecting in the background; call once.
    public func start() {
        let first = state.withLock { s -> Bool in defer { s.started = true }; return !s.started }
        guard first else { return }
        let thread = Thread { [self] in networkLoop() }
        thread.name = "mqtt \(options.clientID)"
        thread.start()
    }

    /// Publishes the offline status (when configured), disconnects and ends the network thread.
    /// Publishes still unacknowledged are abandoned (their rows stay queued for the next run).
    public func close() async {
        let (started, done) = state.withLock { s -> (Bool, Bool) in s.stopping = true; return (s.started, s.threadDone) }
        wake.signal()
        guard started, !done else { abandonPending("the connection was closed"); return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.threadDone { return true }
                s.finished.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
        abandonPending("the connection was closed")
    }

    private func abandonPending(_ why: String) {
        let dones = state.withLock { s -> [@Sendable (MQTTPublishOutcome) -> Void] in
            defer { s.pending = [:]; s.early = [:] }
            return Array(s.pending.values)
        }
        for d in dones { d(.abandoned(why)) }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func networkLoop() {
        var backoff = Backoff(initial: options.reconnectInitial, cap: options.reconnectMax)
        while !stopping {
            captureLibraryLog(true)
            var rc = mosquitto_connect_bind_v5(handle, options.host, Int32(options.port), Int32(options.keepalive), nil, connectProperties)
            var wasConnected = false
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                while !stopping {
                    // 100 ms: a close is noticed within that even with no traffic.
                    rc = mosquitto_loop(handle, 100, 1)
                    if rc != MOSQ_ERR_SUCCESS.rawValue { break }
                    if isConnected { wasConnected = true }
                }
            }
            if stopping { break }
            state.withLock { $0.connected = false }
            if wasConnected { backoff.reset() }
            let delay = backoff.next()
            reportFailure(rc: rc, wasConnected: wasConnected, retryIn: delay)
            _ = wake.wait(timeout: .now() + .milliseconds(Int(delay.milliseconds)))
        }
        shutDown()
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.threadDone = true
            s.connected = false
            defer { s.finished = [] }
            return s.finished
        }
        for w in waiters { w.resume() }
    }

    private func reportFailure(rc: Int32, wasConnected: Bool, retryIn delay: Duration) {
        let (refusal, library) = state.withLock { s in
            defer { s.refusal = nil; s.lastLibraryError = nil }
            return (s.refusal, s.lastLibraryError)
        }
        var why = refusal ?? MQTTConnection.describe(rc)
        if let library, refusal == nil, !why.contains(library) { why += " (\(library))" }
        let retry = "retrying in \(DurationText.format(delay))"
        if wasConnected {
            logger.warning("connection to \(options.displayURL) lost: \(why); \(retry)")
        } else {
            stats.count("mqtt.connect_failures")
            // A refusal (bad credentials, not authorised) or a TLS failure needs a person: error level.
            let needsAttention = refusal != nil || rc == MOSQ_ERR_TLS.rawValue || rc == MOSQ_ERR_TLS_HANDSHAKE.rawValue
                || rc == MOSQ_ERR_CONN_REFUSED.rawValue || library?.contains("SSL") == true
            logger.log(needsAttention ? .error : .warning, "cannot connect to \(options.displayURL): \(why); \(retry)")
        }
    }

    /// Offline status, then DISCONNECT, with a short bound: shutdown must not hang on a dead broker.
    private func shutDown() {
        guard isConnected else { return }
        if let offline = options.will {
            var mid: Int32 = 0
            let rc = offline.payload.withUnsafeBytes { p in
                mosquitto_publish_v5(handle, &mid, offline.topic, Int32(p.count), p.baseAddress, Int32(offline.qos), offline.retain, nil)
            }
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                state.withLock { $0.offlineMid = mid; $0.offlineAcked = offline.qos == 0 }
                let deadline = ContinuousClock.now + .seconds(2)
                while ContinuousClock.now < deadline && !state.withLock({ $0.offlineAcked }) {
                    if mosquitto_loop(handle, 50, 1) != MOSQ_ERR_SUCCESS.rawValue { break }
                }
            }
        }
        mosquitto_disconnect_v5(handle, 0, nil)
        // Let the loop write the DISCONNECT; it returns an error once the socket is closed.
        for _ in 0..<20 where mosquitto_loop(handle, 50, 1) == MOSQ_ERR_SUCCESS.rawValue {}
    }
}
