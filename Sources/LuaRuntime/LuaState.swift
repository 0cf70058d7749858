import CLua

/// A sandboxed Lua 5.4 interpreter: one script, bounded in memory and in instructions per call.
/// The only file that talks to Lua's C API (Sources/CLua).
///
/// Why Lua 5.4 (Debian's liblua5.4) and not LuaJIT (libluajit-5.1, 2.1.0-beta3): measured on
/// this machine with the same C driver (Benchmarks/lua_engines.c, one million calls each):
///
/// | engine | a transform call (a position table in, one attribute set, read back) | a GT06 position frame decoded |
/// |---|---|---|
/// | Lua 5.4 | 0.74 µs | 1.04 µs |
/// | LuaJIT, JIT on | 0.62 µs | 0.24 µs |
/// | LuaJIT, JIT off | 0.63 µs | 0.67 µs |
///
/// LuaJIT is faster, most of all where its compiler works — but compiled code never runs a
/// count hook: `while true do end` under LuaJIT with its JIT on was not stopped by the budget
/// hook and ran until the process was killed, where Lua 5.4 stopped it after the budget. The
/// sandbox's promise (a script that loops is stopped, and never stalls the pipeline) therefore
/// holds only with the JIT off, where LuaJIT's lead is 15 % on transforms and 1.5x on
/// decoding; and Lua 5.4 has 64-bit integers and bitwise operators (`&`, `>>`, `//`), which
/// binary protocols and millisecond times need, where LuaJIT has doubles and a `bit` library.
/// Both benchmark targets are met with Lua 5.4 (Benchmarks/lua.sh).
///
/// The sandbox: the base library without `dofile`, `loadfile`, `collectgarbage` and `print`,
/// a `load` that takes text only (never bytecode), and `string`, `table`, `math`, `utf8`: no
/// `io`, `os`, `require`/`package`, `debug`, `coroutine`, `string.dump` — no file, process or
/// network access. Memory: an allocator that refuses blocks past ``Limits/memoryBytes``, so a
/// script that allocates without end gets a memory error. Instructions: a count hook that
/// raises an error after ``Limits/instructions`` VM instructions of one call. Both surface as a
/// ``LuaFailure`` from the call, never as a trap. (A single call into C — one `string.rep`,
/// one pattern match — counts as one instruction; its cost is bounded by the memory limit and
/// by its subject's length.)
///
/// Not thread-safe: one caller at a time (a transform on its task, a codec on the I/O loop).
public final class LuaState: @unchecked Sendable {
    /// How much one script may use.
    public struct Limits: Sendable, Hashable {
        /// VM instructions one call may run before it is stopped.
        public var instructions: Int
        /// Bytes the script's state may hold.
        public var memoryBytes: Int

        public init(instructions: Int = 100_000, memoryBytes: Int = 64 << 20) {
            self.instructions = instructions
            self.memoryBytes = memoryBytes
        }
    }

    /// The interpreter's own use on top of the script's limit: what locgate pushes (a position,
    /// its state) and reads back is allocated outside the script's account, so that building a
    /// call's arguments never fails after the script used its memory up.
    public static let slack = 16 << 20

    let L: OpaquePointer
    private let memory: UnsafeMutablePointer<locgate_lua_memory>
    public let limits: Limits

    /// A fresh sandboxed state.
    public init(limits: Limits) throws(LuaFailure) {
        self.limits = limits
        memory = .allocate(capacity: 1)
        memory.initialize(to: locgate_lua_memory(used: 0, limit: limits.memoryBytes + Self.slack))
        guard let state = lua_newstate(locgate_lua_alloc, memory) else {
            memory.deallocate()
            throw LuaFailure(.memory, "cannot create a Lua state")
        }
        L = state
        for (name, open) in [("_G", luaopen_base), ("string", luaopen_string), ("table", luaopen_table),
                             ("math", luaopen_math), ("utf8", luaopen_utf8)] as [(String, lua_CFunction)] {
            luaL_requiref(L, name, open, 1)
            locgate_lua_pop(L, 1)
        }
        // A load that takes text only; then nothing that reaches files or makes bytecode.
        let prelude = """
            local rawload = load
            load = function(chunk, name, mode, env) return rawload(chunk, name, "t", env) end
            dofile, loadfile, collectgarbage, print = nil, nil, nil, nil
            string.dump = nil
            """
        try run(prelude, name: "=sandbox")
    }

    deinit {
        lua_close(L)
        memory.deallocate()
    }

    /// Bytes the state holds now.
    public var memoryUsed: Int { memory.pointee.used }

    /// Compiles `source` (text only) and runs its top-level code under the limits; a compile
    /// error says `<name>:<line>: …`.
    public func run(_ source: String, name: String) throws(LuaFailure) {
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        var text = source
        let status = text.withUTF8 { bytes in
            luaL_loadbufferx(L, UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self), bytes.count, name, "t")
        }
        guard status == LUA_OK else { throw failure(status: status, compiling: true) }
        try protectedCall(arguments: 0, results: 0)
    }

    /// A reference to the global function `name`, or nil when the script defines none.
    public func function(_ name: String) -> LuaReference? {
        lua_getglobal(L, name)
        guard lua_type(L, -1) == LUA_TFUNCTION else {
            locgate_lua_pop(L, 1)
            return nil
        }
        return LuaReference(luaL_ref(L, locgate_lua_registry_index()))
    }

    /// Runs `body` with the global `name` on the stack (a table a script declares, such as
    /// `command_types`); nil there when the script sets none.
    public func global<R>(_ name: String, _ body: (LuaStack, Int32) -> R) -> R {
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        lua_getglobal(L, name)
        return body(LuaStack(L: L), top + 1)
    }

    /// A new empty table kept in the registry (per-device state, a connection's session).
    public func newTableReference() -> LuaReference {
        lua_createtable(L, 0, 0)
        return LuaReference(luaL_ref(L, locgate_lua_registry_index()))
    }

    /// Runs `body` with the referenced value on the stack (reading a device's state to save it).
    public func inspect<R>(_ reference: LuaReference, _ body: (LuaStack, Int32) -> R) -> R {
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        let stack = LuaStack(L: L)
        stack.push(reference)
        return body(stack, top + 1)
    }

    /// A reference to the value `push` leaves on the stack (a restored state). What it pushes
    /// must fit in the interpreter's slack (``slack``): callers bound it.
    public func makeReference(_ push: (LuaStack) -> Void) -> LuaReference {
        let top = lua_gettop(L)
        let stack = LuaStack(L: L)
        push(stack)
        lua_settop(L, top + 1)
        return stack.reference()
    }

    /// Forgets a reference.
    public func release(_ reference: LuaReference) {
        luaL_unref(L, locgate_lua_registry_index(), reference.value)
    }

    /// Calls `function` with what `push` puts on the stack (it returns how many values), under
    /// the limits, and hands `read` the stack with the results from `base` on.
    public func call<R>(_ function: LuaReference, results: Int32, push: (LuaStack) -> Int32,
                        read: (LuaStack, _ base: Int32) -> R) throws(LuaFailure) -> R {
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        let stack = LuaStack(L: L)
        stack.push(function)
        let arguments = push(stack)
        try protectedCall(arguments: arguments, results: results)
        return read(stack, top + 1)
    }

    /// Runs the function under `arguments` with the script's limits in force.
    private func protectedCall(arguments: Int32, results: Int32) throws(LuaFailure) {
        memory.pointee.limit = limits.memoryBytes
        locgate_lua_set_budget(L, Int32(clamping: limits.instructions))
        let status = locgate_lua_pcall(L, arguments, results)
        locgate_lua_set_budget(L, 0)
        memory.pointee.limit = limits.memoryBytes + Self.slack
        if status != LUA_OK {
            let error = failure(status: status, compiling: false)
            if error.kind == .memory { collectGarbage() }
            throw error
        }
        if memory.pointee.used > limits.memoryBytes { collectGarbage() }
    }

    /// Frees what the script no longer reaches.
    public func collectGarbage() { _ = locgate_lua_collect(L) }

    /// The failure on top of the stack.
    private func failure(status: Int32, compiling: Bool) -> LuaFailure {
        var length = 0
        let message = lua_type(L, -1) == LUA_TSTRING
            ? lua_tolstring(L, -1, &length).map { String(decoding: UnsafeRawBufferPointer(start: $0, count: length), as: UTF8.self) } ?? ""
            : "an error object of type \(String(cString: lua_typename(L, lua_type(L, -1))))"
        if status == LUA_ERRMEM { return LuaFailure(.memory, message.isEmpty ? "not enough memory" : message) }
        if compiling { return LuaFailure(.compile, message) }
        if message.hasSuffix("instruction budget exceeded") { return LuaFailure(.budget, message) }
        return LuaFailure(.runtime, message)
    }
}

/// A value kept in the state's registry (a function, a table).
public struct LuaReference: Sendable, Hashable {
    let value: Int32
    init(_ value: Int32) { self.value = value }
}

/// Why a script failed: it did not compile, raised an error, ran past its instruction budget or
/// its memory limit. `kind` is a fixed word for metric labels (`compile`, `error`, `budget`, `memory`).
public struct LuaFailure: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case compile, runtime = "error", budget, memory
    }

    public var kind: Kind
    /// Lua's message, with `<file>:<line>:` where the script has one.
    public var message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public init(kind: Kind, message: String) { self.init(kind, message) }

    public var description: String { message }
}

/// The Lua stack during a call: values pushed as arguments, results read back. Indices are
/// absolute (1 is the bottom); tables are built and read in place, without a Swift copy.
public struct LuaStack {
    let L: OpaquePointer

    /// What a value on the stack is.
    public enum Kind: Sendable { case none, `nil`, boolean, number, string, table, function, other }

    public var top: Int32 { lua_gettop(L) }

    // MARK: Pushing

    public func pushNil() { lua_pushnil(L) }
    public func push(_ value: Bool) { lua_pushboolean(L, value ? 1 : 0) }
    public func push(_ value: Int64) { lua_pushinteger(L, lua_Integer(value)) }
    public func push(_ value: Double) { lua_pushnumber(L, value) }
    public func push(_ value: String) {
        var text = value
        text.withUTF8 { bytes in _ = lua_pushlstring(L, bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, bytes.count) }
    }
    public func push(bytes: UnsafeRawBufferPointer) {
        _ = lua_pushlstring(L, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
    }
    public func push(_ reference: LuaReference) { lua_rawgeti(L, locgate_lua_registry_index(), lua_Integer(reference.value)) }
    /// A new table with room for `array` items and `fields` named fields.
    public func newTable(array: Int32 = 0, fields: Int32 = 0) { lua_createtable(L, array, fields) }
    /// Pops a value into `table[name]` (the table at `index`).
    public func setField(_ name: String, of index: Int32) { lua_setfield(L, index, name) }
    /// The same for a name known at compile time: no C string is made for it.
    public func setField(_ name: StaticString, of index: Int32) {
        lua_setfield(L, index, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self))
    }
    /// Pops a value into `table[position]`.
    public func setIndex(_ position: Int64, of index: Int32) { lua_rawseti(L, index, lua_Integer(position)) }
    public func pop(_ count: Int32 = 1) { locgate_lua_pop(L, count) }

    // MARK: Reading

    public func kind(at index: Int32) -> Kind {
        switch lua_type(L, index) {
        case LUA_TNONE: .none
        case LUA_TNIL: .nil
        case LUA_TBOOLEAN: .boolean
        case LUA_TNUMBER: .number
        case LUA_TSTRING: .string
        case LUA_TTABLE: .table
        case LUA_TFUNCTION: .function
        default: .other
        }
    }

    public func bool(at index: Int32) -> Bool { lua_toboolean(L, index) != 0 }
    /// A number (never a string converted).
    public func number(at index: Int32) -> Double? { lua_type(L, index) == LUA_TNUMBER ? lua_tonumberx(L, index, nil) : nil }
    /// An integer, or a float with an integral value.
    public func integer(at index: Int32) -> Int64? {
        guard lua_type(L, index) == LUA_TNUMBER else { return nil }
        var ok: Int32 = 0
        let value = lua_tointegerx(L, index, &ok)
        return ok != 0 ? Int64(value) : nil
    }
    public func isInteger(at index: Int32) -> Bool { lua_isinteger(L, index) != 0 }
    /// A string (never a number converted), as its bytes.
    public func withBytes<R>(at index: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard lua_type(L, index) == LUA_TSTRING else { return nil }
        var length = 0
        guard let pointer = lua_tolstring(L, index, &length) else { return nil }
        return body(UnsafeRawBufferPointer(start: pointer, count: length))
    }
    public func string(at index: Int32) -> String? { withBytes(at: index) { String(decoding: $0, as: UTF8.self) } }
    /// A string or a number, as text (an attribute value).
    public func text(at index: Int32) -> String? {
        switch lua_type(L, index) {
        case LUA_TSTRING: return string(at: index)
        case LUA_TBOOLEAN: return bool(at: index) ? "true" : "false"
        case LUA_TNUMBER:
            if let integer = integer(at: index), isInteger(at: index) { return String(integer) }
            return number(at: index).map { "\($0)" }
        default: return nil
        }
    }

    /// Pushes `table[name]` of the table at `index`, runs `body` with its index, pops it. The
    /// name is known at compile time (a field of a position), so no C string is made for it.
    public func withField<R>(_ name: StaticString, of index: Int32, _ body: (Int32) -> R) -> R {
        lua_getfield(L, index, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self))
        defer { locgate_lua_pop(L, 1) }
        return body(lua_gettop(L))
    }

    /// Pushes `table[key]` for a key made at run time, runs `body` with its index, pops it.
    public func withKey<R>(_ key: String, of index: Int32, _ body: (Int32) -> R) -> R {
        lua_getfield(L, index, key)
        defer { locgate_lua_pop(L, 1) }
        return body(lua_gettop(L))
    }

    /// Whether the string at `index` is exactly `text` (without making a Swift string of it).
    public func string(at index: Int32, equals text: String) -> Bool {
        withBytes(at: index) { bytes in
            var copy = text
            return copy.withUTF8 { $0.elementsEqual(bytes) }
        } ?? false
    }

    /// Pushes `table[position]` of the table at `index`, runs `body` with its index, pops it.
    public func withItem<R>(_ position: Int64, of index: Int32, _ body: (Int32) -> R) -> R {
        lua_rawgeti(L, index, lua_Integer(position))
        defer { locgate_lua_pop(L, 1) }
        return body(lua_gettop(L))
    }

    /// The table's border (`#t` without metamethods).
    public func length(at index: Int32) -> Int { Int(lua_rawlen(L, index)) }

    /// Calls `body(keyIndex, valueIndex)` for each entry of the table at `index` (any order);
    /// `body` returns false to stop.
    public func forEach(in index: Int32, _ body: (Int32, Int32) -> Bool) {
        let table = lua_absindex(L, index)
        lua_pushnil(L)
        while lua_next(L, table) != 0 {
            let top = lua_gettop(L)
            let go = body(top - 1, top)
            locgate_lua_pop(L, 1)
            if !go {
                locgate_lua_pop(L, 1)
                return
            }
        }
    }

    /// Stores the value on top into a registry reference (and pops it).
    public func reference() -> LuaReference { LuaReference(luaL_ref(L, locgate_lua_registry_index())) }
}
