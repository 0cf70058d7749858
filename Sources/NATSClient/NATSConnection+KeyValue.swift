// One of the files that talk to libnats (see NATSConnection.swift): JetStream Key-Value buckets,
// for the state store shared by partitioned aggregators (settings.state.nats).
import CNats
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

extension NATSConnection {
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
            kc.TTL = config.ttl.nanoseconds
            kc.StorageType = config.fileStorage ? js_FileStorage : js_MemoryStorage
            return js_CreateKeyValue(&kv, js, &kc)
        }
        if s == NATS_OK, let kv { return (NATSKeyValueBucket(kv, name: config.bucket, connection: self), true) }
        // Another gateway created it meanwhile (with other settings): use theirs.
        let again = js_KeyValue(&kv, js, config.bucket)
        if again == NATS_OK, let kv { return (NATSKeyValueBucket(kv, name: config.bucket, connection: self), false) }
        throw NATSConnection.error(s, "create key-value bucket \(config.bucket)")
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

    init(_ kv: OpaquePointer, name: String, connection: NATSConnection) {
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

    /// The last entry of `key` as the leader of the bucket's stream has it (a delete or purge
    /// marker is an entry marked `deleted`), or nil when it has none.
    ///
    /// ``get(_:)`` is a direct get (nats.c creates buckets with allow_direct), which any replica
    /// that is about current may answer, so it can miss a write the leader already applied.
    /// This goes through the stream's message get API, which only the stream leader answers:
    /// it fails while the stream or the cluster's meta group has no leader.
    public func latest(_ key: String) throws -> NATSKeyValueEntry? {
        guard let js = connection.js else { throw NATSError(summary: "get \(name) \(key)", detail: "the connection has no JetStream context", jetStreamCode: 0, status: "") }
        var msg: OpaquePointer?
        var code = jsErrCode(0)
        // The stream and subject nats.c's KV functions use for a bucket bound without a domain.
        let s = js_GetLastMsg(&msg, js, "KV_" + name, "$KV.\(name).\(key)", nil, &code)
        if s == NATS_NOT_FOUND || code == JSNoMessageFoundErr { return nil }
        try NATSConnection.check(s, "get \(name) \(key) from the stream leader", code: code)
        guard let msg else { return nil }
        defer { natsMsg_Destroy(msg) }
        let length = Int(natsMsg_GetDataLength(msg))
        let value: [UInt8] = natsMsg_GetData(msg).map { p in
            Array(UnsafeRawBufferPointer(start: p, count: length))
        } ?? []
        // As nats.c reads a marker: KV-Operation DEL or PURGE (a put has none).
        var operation: UnsafePointer<CChar>?
        let deleted = natsMsgHeader_Get(msg, "KV-Operation", &operation) == NATS_OK
            && ["DEL", "PURGE"].contains(operation.map { String(cString: $0) } ?? "")
        return NATSKeyValueEntry(key: key, value: value, revision: natsMsg_GetSequence(msg),
                                 createdMilliseconds: natsMsg_GetTime(msg) / 1_000_000, deleted: deleted)
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
