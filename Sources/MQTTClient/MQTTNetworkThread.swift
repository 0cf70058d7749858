// The second of the two Swift files that talk to libmosquitto (MQTTConnection.swift is the first):
// the network thread that connects, drives the library's loops and shuts the client down.
import CMosquitto
import Foundation
import GatewayCore
import Locking
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

extension MQTTConnection {
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
        wakeup.signal()
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

    /// Runs after the network thread ended (or when it never started): nothing else touches `inFlight`.
    private func abandonPending(_ why: String) {
        let queued = state.withLock { s -> [Outgoing] in
            defer { s.outgoing = []; s.outgoingHead = 0 }
            return Array(s.outgoing[s.outgoingHead...])
        }
        let handedOver = Array(inFlight.values)
        inFlight = [:]
        for d in handedOver { d(.abandoned(why)) }
        for m in queued { m.done(.abandoned(why)) }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func networkLoop() {
        var backoff = Backoff(initial: options.reconnectInitial, cap: options.reconnectMax)
        while !stopping {
            captureLibraryLog(true)
            var rc = mosquitto_connect_bind_v5(handle, options.host, Int32(options.port), Int32(options.keepalive), nil, connectProperties)
            var wasConnected = false
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                // Until the CONNACK, the library's own loop: it drives a non-blocking TLS handshake,
                // whose state its API does not show. 100 ms: a close is noticed within that.
                while !stopping && !isConnected {
                    rc = mosquitto_loop(handle, 100, 1)
                    if rc != MOSQ_ERR_SUCCESS.rawValue { break }
                }
                if rc == MOSQ_ERR_SUCCESS.rawValue && isConnected {
                    wasConnected = true
                    rc = runConnected()
                }
            }
            if stopping { break }
            state.withLock { $0.connected = false }
            if wasConnected { backoff.reset() }
            let delay = backoff.next()
            reportFailure(rc: rc, wasConnected: wasConnected, retryIn: delay)
            wakeup.clear()
            if !stopping { _ = wakeup.waitHere([], timeout: delay) }
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

    /// The loop of a connected client, until the connection fails (its return code) or ``close()``.
    /// One pass: hand over what was published, write everything queued in one
    /// `mosquitto_loop_write`, wait for the socket (or a wake-up), read every packet waiting.
    private func runConnected() -> Int32 {
        while !stopping {
            let fd = mosquitto_socket(handle)
            guard fd >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
            let handed = handOver()
            if mosquitto_want_write(handle) {
                // libmosquitto writes each packet with its own write(2); with the socket corked
                // for the burst they leave as a few full segments, not one each (on loopback each
                // segment also runs the broker's receive path on this thread: half its time).
                let cork = handed > 1
                if cork { Socket.setCorked(fd, true) }
                // libmosquitto's loops return after one packet whenever errno is EAGAIN on entry.
                errno = 0
                let rc = mosquitto_loop_write(handle, 1)
                if cork { Socket.setCorked(fd, false) }
                if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
            }
            // A socket buffer that was full: wait until it drains, then write the rest.
            let events = Int16(POLLIN) | (mosquitto_want_write(handle) ? Int16(POLLOUT) : 0)
            // One second: the keepalive (whole seconds) is checked often enough.
            let (ready, woken) = wakeup.waitHere([fd], events: events, timeout: .seconds(1))
            if woken { wakeup.clear() }
            if let r = ready.first, r.isReadable || r.isHungUp || r.isFailed {
                errno = 0
                // max_packets is ignored: the library reads as many packets as it has messages in
                // flight (at least one), stopping early when the socket has no more.
                let rc = mosquitto_loop_read(handle, 1)
                if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
                // A broker with Nagle on (mosquitto's default) holds its next PUBACKs until our
                // ACK; a corked burst gives our ACKs fewer segments to ride on, and the delayed-ACK
                // timer then stalled the window at low load.
                Socket.acknowledgeQuickly(fd)
            }
            let rc = mosquitto_loop_misc(handle)
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        return MOSQ_ERR_SUCCESS.rawValue
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
