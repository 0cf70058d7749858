// One of the files that talk to libnats (see NATSConnection.swift): JetStream streams and consumers.
import CNats
#if canImport(Glibc)
import Glibc
#endif

extension NATSConnection {
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
                        sc.Duplicates = config.duplicateWindow.nanoseconds
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

    static func info(_ p: UnsafeMutablePointer<jsStreamInfo>) -> NATSStreamInfo {
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
                    cc.AckWait = config.ackWait.nanoseconds
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

    static func consumerInfo(_ p: UnsafeMutablePointer<jsConsumerInfo>) -> NATSConsumerInfo {
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
}
