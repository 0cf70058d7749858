// The one file that talks to libnats (nats.c 3.4): every natsStatus goes through `check`, the
// handles live in `NATSConnection` and are freed in its deinit, callbacks become Swift closures,
// and no C type appears in the public API.
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
    private let nc: OpaquePointer
    private let opts: OpaquePointer
    fileprivate let js: OpaquePointer?
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

    // MARK: - Streams

    /// The stream named `name`, or nil when it does not exist.
    public func streamInfo(_ name: String) async throws -> NATSStreamInfo? {
        try await NATSConnection.blocking { [self] in try streamInfoNow(name) }
    }

    /// `streamInfo` on the calling thread, for a caller on a thread of its own.
    public func streamInfoNow(_ name: String) throws -> NATSStreamInfo? {
        guard let js else { throw NATSError(summary: "stream info", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        var si: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(0)
        let s = js_GetStreamInfo(&si, js, name, nil, &code)
        if s == NATS_NOT_FOUND || code == JSStreamNotFoundErr { return nil }
        try NATSConnection.check(s, "stream info \(name)", code: code)
        defer { jsStreamInfo_Destroy(si) }
        return si.map(NATSConnection.info)
    }

    /// Creates a stream; an existing stream of that name is returned unchanged (never altered).
    public func createStream(_ config: NATSStreamConfig) async throws -> (info: NATSStreamInfo, created: Bool) {
        guard js != nil else { throw NATSError(summary: "create stream", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        if let existing = try await streamInfo(config.name) { return (existing, false) }
        let created: NATSStreamInfo? = try await NATSConnection.blocking { [self] in
            try withCStrings(config.subjects) { subjects in
                var subjects = subjects
                return try subjects.withUnsafeMutableBufferPointer { list in
                    try config.name.withCString { name in
                        var sc = jsStreamConfig()
                        jsStreamConfig_Init(&sc)
                        sc.Name = name
                        sc.Subjects = UnsafeMutablePointer(mutating: list.baseAddress)
                        sc.SubjectsLen = Int32(list.count)
                        sc.Replicas = Int64(config.replicas)
                        sc.Duplicates = nanoseconds(config.duplicateWindow)
                        sc.Storage = config.fileStorage ? js_FileStorage : js_MemoryStorage
                        var si: UnsafeMutablePointer<jsStreamInfo>?
                        var code = jsErrCode(0)
                        let s = js_AddStream(&si, js, &sc, nil, &code)
                        // Another gateway created it first: use theirs, as for any existing stream.
                        if code == JSStreamNameExistErr { return nil }
                        try NATSConnection.check(s, "create stream \(config.name)", code: code)
                        defer { jsStreamInfo_Destroy(si) }
                        return si.map(NATSConnection.info)
                    }
                }
            }
        }
        if let created { return (created, true) }
        guard let existing = try await streamInfo(config.name) else {
            throw NATSError(summary: "create stream", detail: "stream \(config.name) exists and vanished", jetStreamCode: 0, status: "")
        }
        return (existing, false)
    }

    /// The messages stored in `stream` at `sequences` (deleted sequences are skipped), read one by
    /// one with the stream's get API: for inspecting a stream (tests, tools), not for consuming it.
    public func storedMessages(stream: String, sequences: ClosedRange<UInt64>) async throws -> [NATSStoredMessage] {
        guard js != nil else { throw NATSError(summary: "get message", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        return try await NATSConnection.blocking { [self] in
            var out: [NATSStoredMessage] = []
            out.reserveCapacity(sequences.count)
            for seq in sequences {
                var msg: OpaquePointer?
                var code = jsErrCode(0)
                let s = js_GetMsg(&msg, js, stream, seq, nil, &code)
                if s == NATS_NOT_FOUND || code == JSNoMessageFoundErr { continue }
                try NATSConnection.check(s, "get message \(stream) #\(seq)", code: code)
                guard let msg else { continue }
                defer { natsMsg_Destroy(msg) }
                var id: UnsafePointer<CChar>?
                let messageID = natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK ? id.map { String(cString: $0) } : nil
                let length = Int(natsMsg_GetDataLength(msg))
                let data = natsMsg_GetData(msg).map { p in
                    p.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
                } ?? []
                out.append(NATSStoredMessage(sequence: seq, subject: natsMsg_GetSubject(msg).map { String(cString: $0) } ?? "",
                                             messageID: messageID, payload: data))
            }
            return out
        }
    }

    private static func info(_ p: UnsafeMutablePointer<jsStreamInfo>) -> NATSStreamInfo {
        let si = p.pointee
        var subjects: [String] = []
        var name = ""
        var replicas = 1
        var duplicates: Int64 = 0
        var file = true
        if let cfg = si.Config?.pointee {
            name = cfg.Name.map { String(cString: $0) } ?? ""
            for i in 0..<Int(cfg.SubjectsLen) {
                if let s = cfg.Subjects?[i] { subjects.append(String(cString: s)) }
            }
            replicas = Int(cfg.Replicas)
            duplicates = cfg.Duplicates
            file = cfg.Storage == js_FileStorage
        }
        var info = NATSStreamInfo(name: name, subjects: subjects, replicas: replicas, duplicateWindow: .nanoseconds(duplicates),
                                  fileStorage: file, messages: si.State.Msgs, lastSequence: si.State.LastSeq)
        if let cluster = si.Cluster?.pointee {
            info.leader = cluster.Leader.map { String(cString: $0) } ?? ""
            for i in 0..<Int(cluster.ReplicasLen) {
                guard let p = cluster.Replicas?[i]?.pointee else { continue }
                info.followers.append(NATSStreamInfo.Follower(name: p.Name.map { String(cString: $0) } ?? "", current: p.Current,
                                                              offline: p.Offline, lag: p.Lag, lastActive: .nanoseconds(p.Active)))
            }
        }
        return info
    }

    // MARK: - Consumers

    /// Creates the durable pull consumer `config.durable` on `config.stream` with explicit acks;
    /// an existing consumer of that name is returned unchanged (never altered).
    public func createConsumer(_ config: NATSConsumerConfig) async throws -> (info: NATSConsumerInfo, created: Bool) {
        guard js != nil else { throw NATSError(summary: "create consumer", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        if let existing = try await consumerInfo(stream: config.stream, name: config.durable) { return (existing, false) }
        let created: NATSConsumerInfo? = try await NATSConnection.blocking { [self] in
            try config.durable.withCString { durable in
                try withOptionalCString(config.filterSubject) { filter in
                    var cc = jsConsumerConfig()
                    jsConsumerConfig_Init(&cc)
                    cc.Durable = durable
                    cc.FilterSubject = filter
                    cc.AckPolicy = js_AckExplicit
                    cc.AckWait = nanoseconds(config.ackWait)
                    cc.MaxAckPending = Int64(config.maxAckPending)
                    switch config.deliver {
                    case .all: cc.DeliverPolicy = js_DeliverAll
                    case .new: cc.DeliverPolicy = js_DeliverNew
                    case .byStartTime(let t):
                        cc.DeliverPolicy = js_DeliverByStartTime
                        cc.OptStartTime = t.milliseconds * 1_000_000
                    }
                    var ci: UnsafeMutablePointer<jsConsumerInfo>?
                    var code = jsErrCode(0)
                    let s = js_AddConsumer(&ci, js, config.stream, &cc, nil, &code)
                    // Another aggregator created it first: use theirs, as for any existing consumer.
                    if code == JSConsumerNameExistErr { return nil }
                    try NATSConnection.check(s, "create consumer \(config.durable) on \(config.stream)", code: code)
                    defer { jsConsumerInfo_Destroy(ci) }
                    return ci.map(NATSConnection.consumerInfo)
                }
            }
        }
        if let created { return (created, true) }
        guard let existing = try await consumerInfo(stream: config.stream, name: config.durable) else {
            throw NATSError(summary: "create consumer", detail: "consumer \(config.durable) exists and vanished", jetStreamCode: 0, status: "")
        }
        return (existing, false)
    }

    /// The consumer `name` of `stream`, or nil when it (or the stream) does not exist.
    public func consumerInfo(stream: String, name: String) async throws -> NATSConsumerInfo? {
        guard js != nil else { throw NATSError(summary: "consumer info", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        return try await NATSConnection.blocking { [self] in
            var ci: UnsafeMutablePointer<jsConsumerInfo>?
            var code = jsErrCode(0)
            let s = js_GetConsumerInfo(&ci, js, stream, name, nil, &code)
            if s == NATS_NOT_FOUND || code == JSConsumerNotFoundErr || code == JSStreamNotFoundErr { return nil }
            try NATSConnection.check(s, "consumer info \(stream) \(name)", code: code)
            defer { jsConsumerInfo_Destroy(ci) }
            return ci.map(NATSConnection.consumerInfo)
        }
    }

    /// A pull subscription bound to the existing durable consumer `consumer` of `stream`
    /// (create it first with `createConsumer`): the library neither creates nor deletes it.
    public func pullSubscribe(stream: String, consumer: String, filterSubject: String?) async throws -> NATSSubscription {
        guard js != nil else { throw NATSError(summary: "subscribe", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        return try await NATSConnection.blocking { [self] in
            try stream.withCString { streamName in
                try consumer.withCString { consumerName in
                    var so = jsSubOptions()
                    jsSubOptions_Init(&so)
                    so.Stream = streamName
                    so.Consumer = consumerName
                    // Acks are the caller's, sent only once the pipeline took the positions over.
                    so.ManualAck = true
                    var sub: OpaquePointer?
                    var code = jsErrCode(0)
                    // Binding checks the subject against the consumer's filter: give the same one.
                    let s = js_PullSubscribe(&sub, js, filterSubject ?? "", consumerName, nil, &so, &code)
                    try NATSConnection.check(s, "subscribe to consumer \(consumer) of \(stream)", code: code)
                    guard let sub else { throw NATSError(summary: "subscribe", detail: "no subscription", jetStreamCode: 0, status: "") }
                    return NATSSubscription(sub, connection: self, pull: true)
                }
            }
        }
    }

    /// A core NATS subscription to `subject` (wildcards allowed): messages arrive while
    /// connected and are lost otherwise; nothing acknowledges them. Up to `pendingLimit` messages
    /// wait in the client; beyond that the library drops them (counted in `dropped`).
    public func subscribe(subject: String, pendingLimit: Int) throws -> NATSSubscription {
        var sub: OpaquePointer?
        try NATSConnection.check(natsConnection_SubscribeSync(&sub, nc, subject), "subscribe to \(subject)")
        guard let sub else { throw NATSError(summary: "subscribe", detail: "no subscription", jetStreamCode: 0, status: "") }
        // Bytes: room for the limit of messages of the largest size a server allows by default.
        let s = natsSubscription_SetPendingLimits(sub, Int32(clamping: pendingLimit), 256 * 1024 * 1024)
        if s != NATS_OK {
            natsSubscription_Destroy(sub)
            try NATSConnection.check(s, "pending limits")
        }
        return NATSSubscription(sub, connection: self, pull: false)
    }

    /// Answers JetStream for each message (`ack`, `nak` or `term`) with a core publish to its reply
    /// subject: buffered and quick, so it may run in a completion. Returns how many could not be
    /// sent now (closed connection, full reconnect buffer): the server redelivers those after
    /// the consumer's ack wait.
    @discardableResult
    public func acknowledge(_ tokens: [NATSAckToken], _ kind: NATSAckKind) -> Int {
        var failed = 0
        let body = Array(kind.rawValue.utf8)
        for t in tokens {
            let s = body.withUnsafeBufferPointer { natsConnection_Publish(nc, t.reply, $0.baseAddress, Int32($0.count)) }
            if s != NATS_OK { failed += 1 }
        }
        return failed
    }

    private static func consumerInfo(_ p: UnsafeMutablePointer<jsConsumerInfo>) -> NATSConsumerInfo {
        let ci = p.pointee
        var info = NATSConsumerInfo(stream: ci.Stream.map { String(cString: $0) } ?? "",
                                    name: ci.Name.map { String(cString: $0) } ?? "")
        if let cfg = ci.Config?.pointee {
            info.filterSubject = cfg.FilterSubject.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            info.explicitAck = cfg.AckPolicy == js_AckExplicit
            info.pull = cfg.DeliverSubject == nil
            info.ackWait = .nanoseconds(cfg.AckWait)
            info.maxAckPending = Int(cfg.MaxAckPending)
        }
        info.numAckPending = Int(ci.NumAckPending)
        info.numPending = ci.NumPending
        info.numRedelivered = Int(ci.NumRedelivered)
        info.deliveredStreamSequence = ci.Delivered.Stream
        info.ackFloorStreamSequence = ci.AckFloor.Stream
        return info
    }

    // MARK: - Key-Value

    /// Server URLs the client knows: those it was given and the cluster members the servers
    /// announced (a cluster's size, as far as this client can tell).
    public var knownServers: [String] {
        var list: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        var count: Int32 = 0
        guard natsConnection_GetServers(nc, &list, &count) == NATS_OK, let list else { return [] }
        defer {
            for i in 0..<Int(count) { free(list[i]) }
            free(list)
        }
        return (0..<Int(count)).compactMap { list[$0].map { String(cString: $0) } }
    }

    /// Waits up to `timeout` for the connection to be up, blocking the calling thread (for a
    /// caller on a thread of its own); true once connected.
    public func waitUntilConnectedNow(timeout: Duration) -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(Int(max(0, timeout.milliseconds)))
        while !isConnected {
            if natsConnection_IsClosed(nc) || DispatchTime.now() >= deadline { return false }
            // libnats has no blocking wait for a connect; its reconnect thread does the work.
            usleep(10_000)
        }
        return true
    }

    /// Binds the Key-Value bucket `config.bucket`, creating it when it does not exist (with
    /// `config`'s replicas and TTL; an existing bucket is used unchanged). Blocks the calling
    /// thread for a stream request or two: for a caller on a thread of its own.
    public func keyValueNow(_ config: NATSKeyValueConfig) throws -> (bucket: NATSKeyValueBucket, created: Bool) {
        guard let js else { throw NATSError(summary: "key-value bucket", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        var kv: OpaquePointer?
        let found = js_KeyValue(&kv, js, config.bucket)
        if found == NATS_OK, let kv { return (NATSKeyValueBucket(kv, name: config.bucket, connection: self), false) }
        if found != NATS_NOT_FOUND { try NATSConnection.check(found, "bind key-value bucket \(config.bucket)") }
        let s: natsStatus = config.bucket.withCString { bucket in
            var kc = kvConfig()
            kvConfig_Init(&kc)
            kc.Bucket = bucket
            kc.History = 1
            kc.Replicas = Int32(config.replicas)
            kc.TTL = nanoseconds(config.ttl)
            kc.StorageType = config.fileStorage ? js_FileStorage : js_MemoryStorage
            return js_CreateKeyValue(&kv, js, &kc)
        }
        if s == NATS_OK, let kv { return (NATSKeyValueBucket(kv, name: config.bucket, connection: self), true) }
        // Another gateway created it meanwhile (with other settings): use theirs.
        let again = js_KeyValue(&kv, js, config.bucket)
        if again == NATS_OK, let kv { return (NATSKeyValueBucket(kv, name: config.bucket, connection: self), false) }
        throw NATSConnection.error(s, "create key-value bucket \(config.bucket)")
    }

    // MARK: - Status codes

    /// Throws for any status but NATS_OK, with libnats' last error text of this thread.
    fileprivate static func check(_ s: natsStatus, _ what: String, code: jsErrCode = jsErrCode(0)) throws {
        guard s != NATS_OK else { return }
        throw error(s, what, code: code)
    }

    private static func error(_ s: natsStatus, _ what: String, code: jsErrCode = jsErrCode(0)) -> NATSError {
        var last = natsStatus(0)
        let text = nats_GetLastError(&last).map { String(cString: $0) } ?? ""
        let name = natsStatus_GetText(s).map { String(cString: $0) } ?? "status \(s.rawValue)"
        return NATSError(summary: what, detail: text.isEmpty ? name : text, jetStreamCode: Int(code.rawValue), status: name)
    }

    /// Runs a call that waits on the network on a Dispatch thread.
    fileprivate static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            DispatchQueue.global().async { c.resume(with: Result { try body() }) }
        }
    }
}

// MARK: - Callbacks

/// What libnats' callbacks reach: found through a registry by an integer token (the C closure
/// pointer), so a callback that races the connection's deinit finds nothing instead of freed memory.
private final class CallbackTarget: Sendable {
    private struct State {
        var pending: [UInt: @Sendable (NATSPublishResult) -> Void] = [:]
        var backoff: Backoff
        var connectWaiters: [CheckedContinuation<Void, Never>] = []
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var closed = false
        var connected = false
        var everConnected = false
        /// Set by `close`: the disconnect that closing causes is not news.
        var closing = false
    }
    private let state: Mutex<State>
    let events: @Sendable (NATSConnectionEvent) -> Void

    init(events: @escaping @Sendable (NATSConnectionEvent) -> Void, backoff: Backoff) {
        self.events = events
        state = Mutex(State(backoff: backoff))
    }

    private static let registry = Mutex<(next: Int, targets: [Int: CallbackTarget])>((1, [:]))

    static func register(_ t: CallbackTarget) -> Int {
        registry.withLock { r in
            let token = r.next
            r.next += 1
            r.targets[token] = t
            return token
        }
    }

    static func unregister(_ token: Int) { _ = registry.withLock { $0.targets.removeValue(forKey: token) } }

    static func find(_ closure: UnsafeMutableRawPointer?) -> CallbackTarget? {
        guard let closure else { return nil }
        let token = Int(bitPattern: closure)
        return registry.withLock { $0.targets[token] }
    }

    func register(_ key: UInt, _ completion: @escaping @Sendable (NATSPublishResult) -> Void) {
        state.withLock { $0.pending[key] = completion }
    }

    func unregister(_ key: UInt) { _ = state.withLock { $0.pending.removeValue(forKey: key) } }

    func complete(_ key: UInt, _ result: NATSPublishResult) {
        let c = state.withLock { $0.pending.removeValue(forKey: key) }
        c?(result)
    }

    func abandonPending(_ reason: String) {
        let all = state.withLock { s in
            defer { s.pending = [:] }
            return Array(s.pending.values)
        }
        for c in all { c(.abandoned(reason)) }
    }

    func markConnected(url: String) {
        let (waiters, first) = state.withLock { s in
            defer { s.connectWaiters = []; s.everConnected = true; s.connected = true }
            s.backoff.reset()
            return (s.connectWaiters, !s.everConnected)
        }
        events(first ? .connected(url: url) : .reconnected(url: url))
        for w in waiters { w.resume() }
    }

    /// Returns at the next connect, or soon when cancelled (the caller checks its condition again).
    func waitForConnect() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                // Checked under the lock that markConnected and the cancellation handler take, so
                // neither a connect nor a cancellation can slip between the check and the append.
                let now = state.withLock { s -> Bool in
                    if s.connected || Task.isCancelled { return true }
                    s.connectWaiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                defer { s.connectWaiters = [] }
                return s.connectWaiters
            }
            for w in waiters { w.resume() }
        }
    }

    func closing() { state.withLock { $0.closing = true } }

    func markDisconnected() { state.withLock { $0.connected = false } }

    func markClosed(lastError: String) {
        let (waiters, byUs) = state.withLock { s in
            defer { s.closeWaiters = []; s.closed = true; s.connected = false }
            return (s.closeWaiters, s.closing)
        }
        events(.closed(lastError: byUs ? "" : lastError))
        for w in waiters { w.resume() }
        // Waiters for a connect that will never come look again and see the connection closed.
        let connectWaiters = state.withLock { s in
            defer { s.connectWaiters = [] }
            return s.connectWaiters
        }
        for w in connectWaiters { w.resume() }
    }

    /// Returns when the connection closes, or soon when cancelled (the caller checks again).
    func waitForClose() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.closed || Task.isCancelled { return true }
                    s.closeWaiters.append(c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                defer { s.closeWaiters = [] }
                return s.closeWaiters
            }
            for w in waiters { w.resume() }
        }
    }

    var isClosing: Bool { state.withLock { $0.closing } }

    func nextDelay() -> Duration { state.withLock { $0.backoff.next() } }
}

private func nanoseconds(_ d: Duration) -> Int64 {
    d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
}

private func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) throws -> R) rethrows -> R {
    guard let s else { return try body(nil) }
    return try s.withCString { try body($0) }
}

/// Calls `body` with C copies of `strings` (freed afterwards): libnats copies what it keeps.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) throws -> R) rethrows -> R {
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

// MARK: - Key-Value buckets

/// A bound Key-Value bucket (``NATSConnection/keyValueNow(_:)``): its handle is destroyed in
/// deinit; the connection is kept alive until then.
///
/// Every call blocks the calling thread until the server answered (a write returns once the
/// bucket's stream stored it on a majority of its replicas), within the connection's JetStream
/// API timeout: call it from a thread of its own, never a cooperative one. Keys are
/// `[-/_=.a-zA-Z0-9]` tokens separated by dots.
public final class NATSKeyValueBucket: @unchecked Sendable {
    private let kv: OpaquePointer
    private let connection: NATSConnection
    public let name: String

    fileprivate init(_ kv: OpaquePointer, name: String, connection: NATSConnection) {
        self.kv = kv; self.name = name; self.connection = connection
    }

    deinit { kvStore_Destroy(kv) }

    /// The current value of every key matching `filter` (`prefix.>`, `>`); a deleted key is an
    /// entry marked `deleted`.
    ///
    /// The watch behind it may be served by any replica of the bucket's stream, including one
    /// that is behind: compare with the leader's ``NATSStreamInfo/lastSequence`` for a fresh read.
    public func entries(matching filter: String, timeout: Duration) throws -> [NATSKeyValueEntry] {
        var wo = kvWatchOptions()
        kvWatchOptions_Init(&wo)
        var w: OpaquePointer?
        try NATSConnection.check(kvStore_Watch(&w, kv, filter, &wo), "watch \(name) \(filter)")
        defer { kvWatcher_Destroy(w) }
        var out: [NATSKeyValueEntry] = []
        while true {
            var e: OpaquePointer?
            // A nil entry with NATS_OK marks the end of the current values.
            try NATSConnection.check(kvWatcher_Next(&e, w, max(1, timeout.milliseconds)), "read \(name) \(filter)")
            guard let e else { return out }
            defer { kvEntry_Destroy(e) }
            var entry = NATSKeyValueBucket.entry(e)
            entry.deleted = kvEntry_Operation(e) != kvOp_Put
            out.append(entry)
        }
    }

    /// The current value of `key`, or nil when it has none (never written, or deleted).
    public func get(_ key: String) throws -> NATSKeyValueEntry? {
        var e: OpaquePointer?
        let s = kvStore_Get(&e, kv, key)
        if s == NATS_NOT_FOUND { return nil }
        try NATSConnection.check(s, "get \(name) \(key)")
        guard let e else { return nil }
        defer { kvEntry_Destroy(e) }
        return NATSKeyValueBucket.entry(e)
    }

    /// Writes `key` only if it has no value (never written, or deleted).
    public func create(_ key: String, value: [UInt8]) throws -> NATSKeyValueWrite {
        var rev: UInt64 = 0
        let s = value.withUnsafeBytes { kvStore_Create(&rev, kv, key, $0.baseAddress, Int32($0.count)) }
        return try result(s, rev, "create \(name) \(key)")
    }

    /// Writes `key` only if its last revision is `last` (compare-and-swap).
    public func update(_ key: String, value: [UInt8], last: UInt64) throws -> NATSKeyValueWrite {
        var rev: UInt64 = 0
        let s = value.withUnsafeBytes { kvStore_Update(&rev, kv, key, $0.baseAddress, Int32($0.count), last) }
        return try result(s, rev, "update \(name) \(key)")
    }

    /// Deletes `key` (a delete marker; unconditional: nats.c 3.4 has no compare-and-swap delete).
    public func delete(_ key: String) throws {
        try NATSConnection.check(kvStore_Delete(kv, key), "delete \(name) \(key)")
    }

    private func result(_ s: natsStatus, _ rev: UInt64, _ what: String) throws -> NATSKeyValueWrite {
        if s == NATS_OK { return .written(revision: rev) }
        var last = natsStatus(0)
        let text = nats_GetLastError(&last).map { String(cString: $0) } ?? ""
        // JetStream's JSStreamWrongLastSequenceErr (10071), as the PubAck's error text: nats.c
        // hands the KV calls no error code.
        if text.contains("wrong last sequence") { return .conflict(text) }
        try NATSConnection.check(s, what)
        return .written(revision: rev)
    }

    private static func entry(_ e: OpaquePointer) -> NATSKeyValueEntry {
        let length = Int(kvEntry_ValueLen(e))
        let value: [UInt8] = kvEntry_Value(e).map { p in
            Array(UnsafeRawBufferPointer(start: p, count: length))
        } ?? []
        return NATSKeyValueEntry(key: kvEntry_Key(e).map { String(cString: $0) } ?? "", value: value,
                                 revision: kvEntry_Revision(e), createdMilliseconds: kvEntry_Created(e) / 1_000_000)
    }
}

// MARK: - Subscriptions

/// A subscription: a pull subscription bound to a durable JetStream consumer, or a core NATS
/// subscription. Its handle is destroyed in deinit; the connection is kept alive until then.
///
/// Thread-safety: libnats' subscription calls may come from any thread; waiting calls (`fetch`,
/// `next`) run on a Dispatch queue with a timeout, so a cancelled caller returns within it.
public final class NATSSubscription: @unchecked Sendable {
    private let sub: OpaquePointer
    private let connection: NATSConnection
    /// Pull (JetStream, fetched on request) or core (pushed by the server).
    public let isPull: Bool

    fileprivate init(_ sub: OpaquePointer, connection: NATSConnection, pull: Bool) {
        self.sub = sub; self.connection = connection; self.isPull = pull
    }

    deinit { natsSubscription_Destroy(sub) }

    /// Pull subscriptions: asks the consumer for up to `batch` messages and waits up to `timeout`
    /// for them; returns early with fewer when the consumer has no more now, and `[]` when none
    /// came in time.
    public func fetch(batch: Int, timeout: Duration) async throws -> [NATSReceivedMessage] {
        precondition(isPull, "fetch is for pull subscriptions")
        return try await NATSConnection.blocking { [self] in
            var list = natsMsgList()
            var code = jsErrCode(0)
            let s = natsSubscription_Fetch(&list, sub, Int32(clamping: batch), max(1, timeout.milliseconds), &code)
            if s == NATS_TIMEOUT { return [] }
            try NATSConnection.check(s, "fetch", code: code)
            defer { natsMsgList_Destroy(&list) }
            var out: [NATSReceivedMessage] = []
            out.reserveCapacity(Int(list.Count))
            for i in 0..<Int(list.Count) {
                if let m = list.Msgs?[i] { out.append(NATSSubscription.received(m, jetStream: true)) }
            }
            return out
        }
    }

    /// Core subscriptions: waits up to `timeout` for a message, then takes what else is already
    /// waiting in the client, up to `max` in all; `[]` when none came in time.
    public func next(max: Int, timeout: Duration) async throws -> [NATSReceivedMessage] {
        precondition(!isPull, "next is for core subscriptions")
        return try await NATSConnection.blocking { [self] in
            var first: OpaquePointer?
            let s = natsSubscription_NextMsg(&first, sub, Swift.max(1, timeout.milliseconds))
            if s == NATS_TIMEOUT { return [] }
            // A slow consumer is reported once per overflow; the dropped count tells how many.
            if s == NATS_SLOW_CONSUMER { return [] }
            try NATSConnection.check(s, "next message")
            guard let first else { return [] }
            var out = [NATSSubscription.received(first, jetStream: false)]
            natsMsg_Destroy(first)
            var waiting: Int32 = 0
            var bytes: Int32 = 0
            _ = natsSubscription_GetPending(sub, &waiting, &bytes)
            for _ in 0..<min(Int(waiting), max - 1) {
                var m: OpaquePointer?
                guard natsSubscription_NextMsg(&m, sub, 1) == NATS_OK, let m else { break }
                out.append(NATSSubscription.received(m, jetStream: false))
                natsMsg_Destroy(m)
            }
            return out
        }
    }

    /// Core subscriptions: messages the client dropped because `pendingLimit` were waiting.
    public var dropped: Int64 {
        var n: Int64 = 0
        _ = natsSubscription_GetDropped(sub, &n)
        return n
    }

    /// Stops the subscription at the server. A bound durable consumer stays, with its acks.
    public func close() async {
        _ = try? await NATSConnection.blocking { [self] in natsSubscription_Unsubscribe(sub) }
    }

    /// The acknowledgement target of a message is its reply subject (`$JS.ACK.…`), kept as a
    /// string so the C message can be freed at once.
    private static func received(_ m: OpaquePointer, jetStream: Bool) -> NATSReceivedMessage {
        let length = Int(natsMsg_GetDataLength(m))
        let payload = natsMsg_GetData(m).map { p in
            p.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } ?? []
        var r = NATSReceivedMessage(subject: natsMsg_GetSubject(m).map { String(cString: $0) } ?? "", payload: payload)
        if let reply = natsMsg_GetReply(m).map({ String(cString: $0) }), !reply.isEmpty { r.ackToken = NATSAckToken(reply: reply) }
        if jetStream {
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            if natsMsg_GetMetaData(&meta, m) == NATS_OK, let md = meta?.pointee {
                r.deliveries = Int(md.NumDelivered)
                r.streamSequence = md.Sequence.Stream
                r.stream = md.Stream.map { String(cString: $0) }
            }
            jsMsgMetaData_Destroy(meta)
        }
        return r
    }
}
