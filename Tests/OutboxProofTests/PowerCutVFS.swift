import CSQLite
import Foundation

/// An SQLite VFS for tests that knows, at every write, truncate, sync, create and delete, what
/// a power cut at that moment would leave on disk.
///
/// It wraps the default unix VFS: every call goes through to the real files, so SQLite runs as
/// it always does. Beside that it keeps, per file, the contents its last successful `xSync`
/// made durable, and the directory as last synced. SQLite's unix VFS syncs the directory itself
/// (not through the VFS interface): after a delete whose `syncDir` flag is set, and at the first
/// sync of a journal or WAL it opened with `SQLITE_OPEN_CREATE`; this VFS follows those same
/// rules. A file created but never covered by a directory sync (the queue file, which the outbox
/// creates with `open(2)`, until its WAL's first sync) is gone after a cut; a file deleted without
/// `syncDir` (the WAL at a clean close) comes back with the contents last synced.
///
/// Before each such call it can capture images of the files (``CutImage``): what a power cut
/// leaves (only what was synced), the same with the call's write torn (half of it on disk), what
/// a crash of the process leaves (everything written), and that with the write torn. The test
/// opens each image with the normal VFS, after the step that was cut returned.
///
/// Written in Swift: the io-methods table and the VFS struct import as structs of optional
/// `@convention(c)` function pointers, which closures that capture nothing fill. The per-file
/// state SQLite allocates (`szOsFile`) is this VFS's header (the methods pointer, a retained
/// reference to a ``PowerCutFile``) followed by the unix VFS's own file.
final class PowerCutVFS: @unchecked Sendable {
    let name: String
    private let real: UnsafeMutablePointer<sqlite3_vfs>
    private let vfs: UnsafeMutablePointer<sqlite3_vfs>
    private let cName: UnsafeMutablePointer<CChar>
    /// Guards the state below; SQLite calls in on the thread of whoever uses the outbox.
    private let lock = NSLock()
    /// Mutating calls seen so far: call N is cut point N.
    private var calls = 0
    /// The files in the directory now, and the directory as its last sync left it, by path.
    private var present: [String: Inode] = [:]
    private var durable: [String: Inode] = [:]
    private var images: [CutImage] = []
    /// Which cut points to capture images at.
    private var capturing: @Sendable (Int, Call) -> Bool = { _, _ in false }
    /// Writes of a WAL header (at offset 0): one at each creation of the WAL and each restart
    /// of it from the beginning after a checkpoint.
    private var walHeaders = 0

    /// One file's contents on the disk itself: what its last sync made durable.
    final class Inode {
        var synced: [UInt8] = []
    }

    /// The call a cut point comes before.
    enum Call: CustomStringConvertible, Sendable {
        case create(String)
        case write(String, offset: Int, bytes: [UInt8])
        case truncate(String, size: Int)
        case sync(String)
        case delete(String)

        var description: String {
            switch self {
            case .create(let path): "create \(base(path))"
            case .write(let path, let offset, let bytes): "write \(bytes.count) bytes at \(offset) of \(base(path))"
            case .truncate(let path, let size): "truncate \(base(path)) to \(size)"
            case .sync(let path): "sync \(base(path))"
            case .delete(let path): "delete \(base(path))"
            }
        }
    }

    /// The files a cut at one point leaves, by path.
    struct CutImage {
        enum Kind: String, CaseIterable, Sendable {
            case powerLoss = "power loss"
            case powerLossTorn = "power loss, the write torn"
            case processCrash = "process crash"
            case processCrashTorn = "OS crash with all but the write flushed, the write torn"
        }

        var point: Int
        var kind: Kind
        var call: String
        var files: [String: [UInt8]]
    }

    /// Registers a VFS named `name` (not as the default) over the default VFS.
    init(name: String) {
        self.name = name
        real = sqlite3_vfs_find(nil)
        cName = strdup(name)
        vfs = .allocate(capacity: 1)
        vfs.initialize(to: real.pointee)
        vfs.pointee.pNext = nil
        vfs.pointee.zName = UnsafePointer(cName)
        vfs.pointee.szOsFile = Int32(fileHeader) + real.pointee.szOsFile
        vfs.pointee.xOpen = { vfs, name, file, flags, outFlags in
            controller(vfs).open(name, file!, flags: flags, outFlags: outFlags)
        }
        vfs.pointee.xDelete = { vfs, name, syncDir in
            controller(vfs).delete(String(cString: name!), syncDirectory: syncDir != 0)
        }
        // The rest of the unix VFS ignores the VFS it is called with, except these two.
        vfs.pointee.xAccess = { vfs, name, flags, out in
            let real = controller(vfs).real
            return real.pointee.xAccess!(real, name, flags, out)
        }
        vfs.pointee.xFullPathname = { vfs, name, n, out in
            let real = controller(vfs).real
            return real.pointee.xFullPathname!(real, name, n, out)
        }
        vfs.pointee.pAppData = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_vfs_register(vfs, 0)
    }

    /// Unregisters the VFS; every connection on it must be closed.
    func unregister() {
        sqlite3_vfs_unregister(vfs)
    }

    deinit {
        vfs.deallocate()
        free(cName)
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Mutating calls so far (the number of the last cut point).
    var callCount: Int { locked { calls } }

    /// Captures images at the cut points `wanted` accepts from now on.
    func capture(at wanted: @escaping @Sendable (_ point: Int, _ call: Call) -> Bool) { locked { capturing = wanted } }

    /// WAL headers written so far.
    var walHeaderWrites: Int { locked { walHeaders } }

    /// The images captured since the last call.
    func takeImages() -> [CutImage] {
        locked {
            defer { images = [] }
            return images
        }
    }

    /// Counts a cut point before `call`, capturing its images when wanted.
    private func cut(before call: Call) {
        calls += 1
        if case .write(let path, 0, _) = call, path.hasSuffix("-wal") { walHeaders += 1 }
        guard capturing(calls, call) else { return }
        let afterPowerLoss = durable.mapValues(\.synced)
        var afterProcessCrash: [String: [UInt8]] = [:]
        for path in present.keys { afterProcessCrash[path] = FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? [] }
        let shown = call.description
        images.append(CutImage(point: calls, kind: .powerLoss, call: shown, files: afterPowerLoss))
        images.append(CutImage(point: calls, kind: .processCrash, call: shown, files: afterProcessCrash))
        guard case .write(let path, let offset, let bytes) = call, bytes.count > 1 else { return }
        // The first half of the write reached the disk, the rest did not.
        let half = Array(bytes.prefix(bytes.count / 2))
        if let inode = durable[path], inode === present[path] {
            images.append(CutImage(point: calls, kind: .powerLossTorn, call: shown,
                                   files: afterPowerLoss.merging([path: written(inode.synced, half, at: offset)]) { $1 }))
        }
        images.append(CutImage(point: calls, kind: .processCrashTorn, call: shown,
                               files: afterProcessCrash.merging([path: written(afterProcessCrash[path] ?? [], half, at: offset)]) { $1 }))
    }

    private func written(_ contents: [UInt8], _ bytes: [UInt8], at offset: Int) -> [UInt8] {
        var out = contents
        if out.count < offset + bytes.count { out += [UInt8](repeating: 0, count: offset + bytes.count - out.count) }
        out.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
        return out
    }

    // MARK: - Calls from SQLite

    /// Files whose writes are followed: the database, its journals and its WAL (not temp files).
    private static let followed = SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_SUPER_JOURNAL
    /// Files whose first sync syncs the directory when opened with `SQLITE_OPEN_CREATE` (the unix VFS's rule).
    private static let syncingDirectory = SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_SUPER_JOURNAL

    fileprivate func open(_ name: sqlite3_filename?, _ file: UnsafeMutablePointer<sqlite3_file>, flags: Int32, outFlags: UnsafeMutablePointer<Int32>?) -> Int32 {
        let raw = UnsafeMutableRawPointer(file)
        file.pointee.pMethods = nil
        let path = name.map { String(cString: $0) }
        let followed = path != nil && flags & Self.followed != 0
        if followed, let path, flags & SQLITE_OPEN_CREATE != 0, access(path, F_OK) != 0 {
            locked { cut(before: .create(path)) }
        }
        let rc = real.pointee.xOpen!(real, name, innerFile(file), flags, outFlags)
        guard rc == SQLITE_OK else { return rc }
        let handle = PowerCutFile(vfs: self, path: followed ? path : nil,
                                  syncsDirectory: flags & SQLITE_OPEN_CREATE != 0 && flags & Self.syncingDirectory != 0)
        if let path = handle.path {
            // Unknown so far: created now, or by the outbox with open(2); nothing of it is durable yet.
            locked { if present[path] == nil { present[path] = Inode() } }
        }
        raw.storeBytes(of: Unmanaged.passRetained(handle).toOpaque(), toByteOffset: MemoryLayout<UnsafeRawPointer>.size, as: UnsafeMutableRawPointer.self)
        file.pointee.pMethods = UnsafePointer(powerCutMethods)
        return SQLITE_OK
    }

    fileprivate func delete(_ path: String, syncDirectory: Bool) -> Int32 {
        let followed = locked { present[path] != nil }
        if followed { locked { cut(before: .delete(path)) } }
        let rc = real.pointee.xDelete!(real, path, syncDirectory ? 1 : 0)
        // SQLITE_IOERR_DELETE_NOENT: it was gone already.
        if followed && (rc == SQLITE_OK || rc == SQLITE_IOERR | (23 << 8)) {
            locked {
                present[path] = nil
                if syncDirectory { durable = present }
            }
        }
        return rc
    }

    fileprivate func willWrite(_ file: PowerCutFile, _ bytes: [UInt8], at offset: Int) {
        guard let path = file.path else { return }
        locked { cut(before: .write(path, offset: offset, bytes: bytes)) }
    }

    fileprivate func willTruncate(_ file: PowerCutFile, to size: Int) {
        guard let path = file.path else { return }
        locked { cut(before: .truncate(path, size: size)) }
    }

    fileprivate func willSync(_ file: PowerCutFile) {
        guard let path = file.path else { return }
        locked { cut(before: .sync(path)) }
    }

    /// After a successful sync: the file's contents are durable, and at its first sync a journal
    /// or WAL made its directory entry, and every other change to the directory, durable too.
    fileprivate func synced(_ file: PowerCutFile) {
        guard let path = file.path else { return }
        let contents = FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
        locked {
            present[path]?.synced = contents
            if file.syncsDirectory { durable = present }
        }
        file.syncsDirectory = false
    }
}

/// An open file of a ``PowerCutVFS``.
final class PowerCutFile {
    unowned let vfs: PowerCutVFS
    /// Nil for files whose writes are not followed (temp files).
    let path: String?
    var syncsDirectory: Bool

    init(vfs: PowerCutVFS, path: String?, syncsDirectory: Bool) {
        self.vfs = vfs
        self.path = path
        self.syncsDirectory = syncsDirectory
    }
}

private func base(_ path: String) -> String { path.split(separator: "/").last.map(String.init) ?? path }

/// Bytes before the unix VFS's file in ours: the methods pointer and the ``PowerCutFile``.
private let fileHeader = 2 * MemoryLayout<UnsafeRawPointer>.size

private func controller(_ vfs: UnsafeMutablePointer<sqlite3_vfs>?) -> PowerCutVFS {
    Unmanaged<PowerCutVFS>.fromOpaque(vfs!.pointee.pAppData).takeUnretainedValue()
}

private func innerFile(_ file: UnsafeMutablePointer<sqlite3_file>?) -> UnsafeMutablePointer<sqlite3_file> {
    (UnsafeMutableRawPointer(file!) + fileHeader).assumingMemoryBound(to: sqlite3_file.self)
}

private func handle(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Unmanaged<PowerCutFile> {
    Unmanaged.fromOpaque(UnsafeRawPointer(file!).load(fromByteOffset: MemoryLayout<UnsafeRawPointer>.size, as: UnsafeRawPointer.self))
}

private func inner(_ file: UnsafeMutablePointer<sqlite3_file>?) -> sqlite3_io_methods {
    innerFile(file).pointee.pMethods!.pointee
}

/// Version 2: shared memory (WAL) but no memory-mapped reads, which would bypass xRead.
private nonisolated(unsafe) let powerCutMethods: UnsafeMutablePointer<sqlite3_io_methods> = {
    let m = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
    m.initialize(to: sqlite3_io_methods())
    m.pointee.iVersion = 2
    m.pointee.xClose = { f in
        let rc = inner(f).xClose!(innerFile(f))
        handle(f).release()
        return rc
    }
    m.pointee.xRead = { f, buffer, amount, offset in inner(f).xRead!(innerFile(f), buffer, amount, offset) }
    m.pointee.xWrite = { f, buffer, amount, offset in
        let file = handle(f).takeUnretainedValue()
        if file.path != nil, let buffer {
            file.vfs.willWrite(file, Array(UnsafeRawBufferPointer(start: buffer, count: Int(amount))), at: Int(offset))
        }
        return inner(f).xWrite!(innerFile(f), buffer, amount, offset)
    }
    m.pointee.xTruncate = { f, size in
        let file = handle(f).takeUnretainedValue()
        file.vfs.willTruncate(file, to: Int(size))
        return inner(f).xTruncate!(innerFile(f), size)
    }
    m.pointee.xSync = { f, flags in
        let file = handle(f).takeUnretainedValue()
        file.vfs.willSync(file)
        let rc = inner(f).xSync!(innerFile(f), flags)
        if rc == SQLITE_OK { file.vfs.synced(file) }
        return rc
    }
    m.pointee.xFileSize = { f, size in inner(f).xFileSize!(innerFile(f), size) }
    m.pointee.xLock = { f, level in inner(f).xLock!(innerFile(f), level) }
    m.pointee.xUnlock = { f, level in inner(f).xUnlock!(innerFile(f), level) }
    m.pointee.xCheckReservedLock = { f, out in inner(f).xCheckReservedLock!(innerFile(f), out) }
    m.pointee.xFileControl = { f, op, arg in inner(f).xFileControl!(innerFile(f), op, arg) }
    m.pointee.xSectorSize = { f in inner(f).xSectorSize!(innerFile(f)) }
    m.pointee.xDeviceCharacteristics = { f in inner(f).xDeviceCharacteristics!(innerFile(f)) }
    m.pointee.xShmMap = { f, page, size, extend, out in inner(f).xShmMap!(innerFile(f), page, size, extend, out) }
    m.pointee.xShmLock = { f, offset, n, flags in inner(f).xShmLock!(innerFile(f), offset, n, flags) }
    m.pointee.xShmBarrier = { f in inner(f).xShmBarrier!(innerFile(f)) }
    m.pointee.xShmUnmap = { f, delete in inner(f).xShmUnmap!(innerFile(f), delete) }
    return m
}()
