// One of the four files that talk to libnats (nats.c 3.4), with NATSConnection+JetStream.swift
// (streams and consumers), NATSConnection+KeyValue.swift (Key-Value buckets) and
// NATSSubscription.swift: every natsStatus goes through `check`
// (here), the handles live in `NATSConnection` and `NATSSubscription` and are freed in their
// deinit, callbacks become Swift closures (here, onto `CallbackTarget`), and no C type appears in
// the public API.
import CNats
import Dispatch
import GatewayCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One NATS connection (with its JetStream context when asked for), reconnecting to any server
/// of the cluster forever with capped exponential backoff.
///
/// Thread-safety: libnats' connection and JetStream context are safe to use from several threads;
/// the handles are created in `connect` and destroyed only in deinit, when no caller can hold the
/// object any more, so every method may be called from any thread. Calls that wait on the network
/// (`flush`, stream requests, connecting) run on a Dispatch queue, never on a cooperative thread.
public final class NATSConnection: @unchecked Sendable {
    let nc: OpaquePointer
    private let opts: OpaquePointer
    let js: OpaquePointer?
    private let target: CallbackTarget
    private let token: Int

    private init(nc: OpaquePointer, opts: OpaquePointer, js: OpaquePointer?, target: CallbackTarget, token: Int) {
        self.nc = nc; self.opts = opts; self.js = js; self.target = target; self.token = token
    }

    deinit {
        // Unregistered first: a callback still running on a libnats thread then finds no target.
        CallbackTarget.unregister(token)
        target.closing()
        if let js { jsCtx_Destroy(js) }
        natsConnection_Destroy(nc)
        natsOptions_Destroy(opts)
        target.abandonPending("connection closed")
    }

    /// Connects to the servers. When none answers, returns anyway and keeps trying in the
    /// background (`events` tells when it connected): a gateway that starts while the network is
    /// down must still start. Throws for what retrying cannot fix (an unreadable certificate).
    public static func connect(_ options: NATSConnectionOptions, jetStream: NATSJetStreamSettings?,
                               events: @escaping @Sendable (NATSConnectionEvent) -> Void) async throws -> NATSConnection {
        try await blocking { try open(options, jetStream: jetStream, events: events) }
    }

    /// `connect` on the calling thread, for a caller on a thread of its own (a state store opened
    /// while the pipeline is built).
    public static func connectNow(_ options: NATSConnectionOptions, jetStream: NATSJetStreamSettings?,
                                  events: @escaping @Sendable (NATSConnectionEvent) -> Void) throws -> NATSConnection {
        try open(options, jetStream: jetStream, events: events)
    }

    private static func open(_ options: NATSConnectionOptions, jetStream: NATSJetStreamSettings?,
                             events: @escaping @Sendable (NATSConnectionEvent) -> Void) throws -> NATSConnection {
        var o: OpaquePointer?
        try check(natsOptions_Create(&o), "create options")
        guard let o else { throw NATSError(summary: "create options", detail: "no memory", jetStreamCode: 0, status: "") }
        let target = CallbackTarget(events: events, backoff: Backoff(initial: options.reconnectInitial, cap: options.reconnectMax))
        let token = CallbackTarget.register(target)
        let closure = UnsafeMutableRawPointer(bitPattern: token)
        do {
            try configure(o, options, closure: closure)
        } catch {
            CallbackTarget.unregister(token)
            natsOptions_Destroy(o)
            throw error
        }
        var c: OpaquePointer?
        let s = natsConnection_Connect(&c, o)
        // NOT_YET_CONNECTED: the connection exists and retries in the background.
        if s != NATS_OK && s != NATS_NOT_YET_CONNECTED {
            let e = error(s, "connect to \(options.servers.joined(separator: ", "))")
            CallbackTarget.unregister(token)
            natsOptions_Destroy(o)
            throw e
        }
        guard let c else { throw NATSError(summary: "connect", detail: "no connection", jetStreamCode: 0, status: "") }
        if s == NATS_OK { target.markConnected(url: connectedURL(c)) }
        var js: OpaquePointer?
        if let jetStream {
            var jo = jsOptions()
            jsOptions_Init(&jo)
            jo.Wait = jetStream.apiTimeout.milliseconds
            jo.PublishAsync.MaxPending = Int64(jetStream.maxPendingAcks)
            jo.PublishAsync.StallWait = max(1, jetStream.stallWait.milliseconds)
            jo.PublishAsync.AckHandler = pubAckHandler
            jo.PublishAsync.AckHandlerClosure = closure
            let jsStatus = natsConnection_JetStream(&js, c, &jo)
            if jsStatus != NATS_OK {
                let e = error(jsStatus, "create JetStream context")
                CallbackTarget.unregister(token)
                natsConnection_Destroy(c)
                natsOptions_Destroy(o)
                throw e
            }
        }
        return NATSConnection(nc: c, opts: o, js: js, target: target, token: token)
    }

    private static func configure(_ o: OpaquePointer, _ options: NATSConnectionOptions, closure: UnsafeMutableRawPointer?) throws {
        try withCStrings(options.servers) { list in
            var list = list
            try check(natsOptions_SetServers(o, &list, Int32(list.count)), "servers")
        }
        try check(natsOptions_SetName(o, options.name), "name")
        try check(natsOptions_SetTimeout(o, options.connectTimeout.milliseconds), "connect_timeout")
        // Forever: a gateway waits for its broker however long it is away.
        try check(natsOptions_SetMaxReconnect(o, -1), "reconnect")
        try check(natsOptions_SetCustomReconnectDelay(o, reconnectDelay, closure), "reconnect")
        try check(natsOptions_SetRetryOnFailedConnect(o, true, connectedHandler, closure), "retry on failed connect")
        try check(natsOptions_SetDisconnectedCB(o, disconnectedHandler, closure), "disconnected callback")
        try check(natsOptions_SetReconnectedCB(o, reconnectedHandler, closure), "reconnected callback")
        try check(natsOptions_SetClosedCB(o, closedHandler, closure), "closed callback")
        try check(natsOptions_SetErrorHandler(o, errorHandler, closure), "error callback")
        switch options.credentials {
        case .none: break
        case .credentialsFile(let path): try check(natsOptions_SetUserCredentialsFromFiles(o, path, nil), "credentials")
        case .nkey(let key, let seed): try check(natsOptions_SetNKeyFromSeed(o, key, seed), "nkey")
        case .token(let token): try check(natsOptions_SetToken(o, token), "token")
        case .userPassword(let user, let password): try check(natsOptions_SetUserInfo(o, user, password), "user")
        }
        if let tls = options.tls {
            try check(natsOptions_SetSecure(o, true), "tls")
            if let ca = tls.caFile { try check(natsOptions_LoadCATrustedCertificates(o, ca), "tls.ca_file") }
            if let cert = tls.certFile, let key = tls.keyFile { try check(natsOptions_LoadCertificatesChain(o, cert, key), "tls.cert_file") }
            try check(natsOptions_SkipServerVerification(o, !tls.verify), "tls.verify")
        }
    }

    // MARK: - State

    /// True while connected to a server (not while reconnecting).
    public var isConnected: Bool { natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED }

    /// Waits until the connection is up (returns at once when it is); throws on cancellation.
    public func waitUntilConnected() async throws {
        while !isConnected {
            try Task.checkCancellation()
            if natsConnection_IsClosed(nc) {
                throw NATSError(summary: "connect", detail: "the connection was closed", jetStreamCode: 0, status: "Connection Closed")
            }
            await target.waitForConnect()
        }
        try Task.checkCancellation()
    }

    /// Returns once the connection is closed for good (by `close()` or by the library); throws on cancellation.
    public func waitUntilClosed() async throws {
        while !natsConnection_IsClosed(nc) {
            try Task.checkCancellation()
            await target.waitForClose()
        }
    }

    /// The URL of the server currently connected to, or "" while disconnected.
    public var connectedURL: String { NATSConnection.connectedURL(nc) }

    private static func connectedURL(_ c: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard natsConnection_GetConnectedUrl(c, &buffer, buffer.count) == NATS_OK else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Closes the connection (pending publishes are answered `.abandoned`); the handles are freed in deinit.
    public func close() async {
        target.closing()
        _ = try? await NATSConnection.blocking { [self] in natsConnection_Close(nc) }
        target.abandonPending("connection closed")
    }

    /// `close` on the calling thread, for a caller on a thread of its own.
    public func closeNow() {
        target.closing()
        natsConnection_Close(nc)
        target.abandonPending("connection closed")
    }

    // MARK: - Publishing

    /// Core NATS publish: buffered by the client and written soon; nothing confirms delivery
    /// (a `flush` confirms the server has read it). Throws when the client cannot take it now
    /// (its reconnect buffer is full, or the connection is closed).
    public func publish(subject: String, payload: [UInt8], headers: [(String, String)] = []) throws {
        let msg = try NATSConnection.makeMessage(subject: subject, payload: payload, headers: headers)
        defer { natsMsg_Destroy(msg) }
        try NATSConnection.check(natsConnection_PublishMsg(nc, msg), "publish")
    }

    /// Waits until the server has processed everything published so far (a PING/PONG round trip).
    public func flush(timeout: Duration) async throws {
        try await NATSConnection.blocking { [self] in
            try NATSConnection.check(natsConnection_FlushTimeout(nc, max(1, timeout.milliseconds)), "flush")
        }
    }

    /// JetStream publish without waiting: `completion` runs exactly once, on a libnats thread,
    /// with the PubAck or why there is none. `messageID` becomes `Nats-Msg-Id` (the stream drops a
    /// second message with the same id inside its duplicate window); `expectStream` makes the
    /// server refuse the message unless that stream captures it; after `ackTimeout` without an
    /// answer the result is `.timedOut`. Throws (and never calls `completion`) when the client
    /// cannot take the message now: the connection is closed, the reconnect buffer is full, or
    /// more than `maxPendingAcks` are waiting for longer than `stallWait`.
    public func publishAsync(subject: String, payload: [UInt8], messageID: String?, expectStream: String?,
                             ackTimeout: Duration, completion: @escaping @Sendable (NATSPublishResult) -> Void) throws {
        guard let js else { throw NATSError(summary: "publish", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        var msg: OpaquePointer? = try NATSConnection.makeMessage(subject: subject, payload: payload, headers: [])
        let key = UInt(bitPattern: msg)
        // Registered before the call: the PubAck can arrive on another thread before it returns.
        target.register(key, completion)
        var po = jsPubOptions()
        jsPubOptions_Init(&po)
        po.MaxWait = max(1, ackTimeout.milliseconds)
        let s = withOptionalCString(messageID) { id in
            withOptionalCString(expectStream) { stream in
                po.MsgId = id
                po.ExpectStream = stream
                return js_PublishMsgAsync(js, &msg, &po)
            }
        }
        if s != NATS_OK {
            let e = NATSConnection.error(s, "publish")
            target.unregister(key)
            // On failure the message is still ours (the pointer was not cleared).
            natsMsg_Destroy(msg)
            throw e
        }
    }

    /// JetStream publish that waits for the PubAck (one round trip per message): the simple,
    /// slow way, kept as the reference the asynchronous window is measured against.
    public func publishAndWait(subject: String, payload: [UInt8], messageID: String?, timeout: Duration) async throws -> NATSPublishResult {
        guard js != nil else { throw NATSError(summary: "publish", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        return try await NATSConnection.blocking { [self] in try publishAndWaitNow(subject: subject, payload: payload, messageID: messageID, timeout: timeout) }
    }

    /// `publishAndWait` on the calling thread, for a benchmark loop on a thread of its own.
    public func publishAndWaitNow(subject: String, payload: [UInt8], messageID: String?, timeout: Duration) throws -> NATSPublishResult {
        let msg = try NATSConnection.makeMessage(subject: subject, payload: payload, headers: [])
        defer { natsMsg_Destroy(msg) }
        var po = jsPubOptions()
        jsPubOptions_Init(&po)
        po.MaxWait = max(1, timeout.milliseconds)
        var ack: UnsafeMutablePointer<jsPubAck>?
        var code = jsErrCode(0)
        let s = withOptionalCString(messageID) { id in
            po.MsgId = id
            return js_PublishMsg(&ack, js, msg, &po, &code)
        }
        defer { jsPubAck_Destroy(ack) }
        if s == NATS_TIMEOUT { return .timedOut }
        if s == NATS_NO_RESPONDERS { return .noResponders }
        if s != NATS_OK {
            let e = NATSConnection.error(s, "publish", code: code)
            if code.rawValue != 0 { return .refused(code: Int(code.rawValue), text: e.detail) }
            throw e
        }
        guard let pa = ack?.pointee else { return .refused(code: 0, text: "no PubAck") }
        return .stored(stream: pa.Stream.map { String(cString: $0) } ?? "", sequence: pa.Sequence, duplicate: pa.Duplicate)
    }

    private static func makeMessage(subject: String, payload: [UInt8], headers: [(String, String)]) throws -> OpaquePointer {
        var msg: OpaquePointer?
        let s = payload.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { natsMsg_Create(&msg, subject, nil, $0.baseAddress, Int32($0.count)) }
        }
        try check(s, "create message")
        guard let msg else { throw NATSError(summary: "create message", detail: "no memory", jetStreamCode: 0, status: "") }
        for (name, value) in headers {
            let hs = natsMsgHeader_Set(msg, name, value)
            if hs != NATS_OK {
                natsMsg_Destroy(msg)
                try check(hs, "set header \(name)")
            }
        }
        return msg
    }

    // MARK: - Status codes

    /// Throws for any status but NATS_OK, with libnats' last error text of this thread.
    static func check(_ s: natsStatus, _ what: String, code: jsErrCode = jsErrCode(0)) throws {
        guard s != NATS_OK else { return }
        throw error(s, what, code: code)
    }

    static func error(_ s: natsStatus, _ what: String, code: jsErrCode = jsErrCode(0)) -> NATSError {
        var last = natsStatus(0)
        let text = nats_GetLastError(&last).map { String(cString: $0) } ?? ""
        let name = natsStatus_GetText(s).map { String(cString: $0) } ?? "status \(s.rawValue)"
        return NATSError(summary: what, detail: text.isEmpty ? name : text, jetStreamCode: Int(code.rawValue), status: name)
    }

    /// Runs a call that waits on the network on a Dispatch thread.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            DispatchQueue.global().async { c.resume(with: Result { try body() }) }
        }
    }
}

func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) throws -> R) rethrows -> R {
    guard let s else { return try body(nil) }
    return try s.withCString { try body($0) }
}

/// Calls `body` with C copies of `strings` (freed afterwards): libnats copies what it keeps.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) throws -> R) rethrows -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { for c in copies { free(c) } }
    return try body(copies.map { $0.map { UnsafePointer($0) } })
}

private let connectedHandler: natsConnectionHandler = { nc, closure in
    guard let t = CallbackTarget.find(closure), let nc else { return }
    var buffer = [CChar](repeating: 0, count: 256)
    let url = natsConnection_GetConnectedUrl(nc, &buffer, buffer.count) == NATS_OK
        ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    t.markConnected(url: url)
}

private let reconnectedHandler: natsConnectionHandler = { nc, closure in
    // Same bookkeeping as a first connect: waiters resume, the backoff starts over.
    connectedHandler(nc, closure)
}

private let disconnectedHandler: natsConnectionHandler = { _, closure in
    guard let t = CallbackTarget.find(closure) else { return }
    t.markDisconnected()
    if !t.isClosing { t.events(.disconnected) }
}

private let closedHandler: natsConnectionHandler = { nc, closure in
    guard let t = CallbackTarget.find(closure) else { return }
    var last: UnsafePointer<CChar>?
    var text = ""
    if let nc, natsConnection_GetLastError(nc, &last) != NATS_OK, let last { text = String(cString: last) }
    t.markClosed(lastError: text)
}

private let errorHandler: natsErrHandler = { _, _, status, closure in
    let text = natsStatus_GetText(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
    CallbackTarget.find(closure)?.events(.asyncError(text))
}

/// Called by libnats after a whole round over the servers failed, without its lock held.
private let reconnectDelay: natsCustomReconnectDelayHandler = { nc, attempts, closure in
    guard let t = CallbackTarget.find(closure) else { return 1000 }
    let delay = t.nextDelay()
    var last: UnsafePointer<CChar>?
    var text = ""
    if let nc, natsConnection_GetLastError(nc, &last) != NATS_OK, let last { text = String(cString: last) }
    t.events(.retrying(round: Int(attempts), lastError: text, delay: delay))
    return delay.milliseconds
}

/// One PubAck, timeout or error for an asynchronous publish; the message is ours to destroy.
private let pubAckHandler: jsPubAckHandler = { _, msg, pa, pae, closure in
    defer { natsMsg_Destroy(msg) }
    guard let t = CallbackTarget.find(closure) else { return }
    let key = UInt(bitPattern: msg)
    if let pa = pa?.pointee {
        let stream = pa.Stream.map { String(cString: $0) } ?? ""
        t.complete(key, .stored(stream: stream, sequence: pa.Sequence, duplicate: pa.Duplicate))
    } else if let pae = pae?.pointee {
        let result: NATSPublishResult
        if pae.Err == NATS_TIMEOUT {
            result = .timedOut
        } else if pae.Err == NATS_NO_RESPONDERS {
            result = .noResponders
        } else {
            result = .refused(code: Int(pae.ErrCode.rawValue), text: pae.ErrText.map { String(cString: $0) } ?? "")
        }
        t.complete(key, result)
    }
}
