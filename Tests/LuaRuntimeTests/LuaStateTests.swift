import GatewayCore
import LuaRuntime
import Testing

/// The sandbox: what a script cannot reach, and what stops it.
@Suite(.timeLimit(.minutes(1))) struct LuaStateTests {
    static let limits = LuaState.Limits(instructions: 100_000, memoryBytes: 8 << 20)

    /// Calls the global `name` with no arguments; the result as text, or the failure.
    static func call(_ lua: LuaState, _ name: String) -> Result<String?, LuaFailure> {
        guard let function = lua.function(name) else { return .failure(LuaFailure(kind: .runtime, message: "no \(name)")) }
        do {
            return .success(try lua.call(function, results: 1, push: { _ in 0 }, read: { stack, base in stack.text(at: base) }))
        } catch {
            return .failure(error)
        }
    }

    static func failure(_ result: Result<String?, LuaFailure>) -> LuaFailure? {
        if case .failure(let f) = result { return f }
        return nil
    }

    @Test func aCompileErrorSaysTheFileAndTheLine() throws {
        let lua = try LuaState(limits: Self.limits)
        #expect(throws: LuaFailure.self) { try lua.run("x = 1\nfunction f(\n", name: "@ignition.lua") }
        do {
            try lua.run("x = 1\nlocal y = = 2\n", name: "@ignition.lua")
            Issue.record("compiled")
        } catch {
            #expect(error.kind == .compile)
            #expect(error.message.hasPrefix("ignition.lua:2:"), "\(error.message)")
        }
    }

    @Test(arguments: ["io", "os", "require", "package", "debug", "dofile", "loadfile", "collectgarbage", "coroutine", "print",
                      "string.dump"])
    func aLibraryThatReachesOutsideIsNotThere(name: String) throws {
        let lua = try LuaState(limits: Self.limits)
        try lua.run("function probe() return type(\(name)) end", name: "=probe")
        #expect(try Self.call(lua, "probe").get() == "nil")
    }

    @Test func callingWhatIsNotThereIsAnErrorOfTheScript() throws {
        let lua = try LuaState(limits: Self.limits)
        try lua.run("function run() return os.execute('touch /tmp/locgate-lua-escape') end\nfunction open() return io.open('/etc/passwd') end",
                    name: "@escape.lua")
        for name in ["run", "open"] {
            let failure = Self.failure(Self.call(lua, name))
            #expect(failure?.kind == .runtime)
            #expect(failure?.message.hasPrefix("escape.lua:") == true, "\(String(describing: failure))")
        }
    }

    @Test func loadTakesTextAndRefusesBytecode() throws {
        let lua = try LuaState(limits: Self.limits)
        try lua.run("""
            function text() return load("return 40 + 2")() end
            function bytecode() local f, err = load("\\27Lua\\84\\0" .. string.rep("x", 32)) return f and "loaded" or err end
            """, name: "=load")
        #expect(try Self.call(lua, "text").get() == "42")
        #expect(try Self.call(lua, "bytecode").get()?.contains("binary chunk") == true)
    }

    @Test func aLoopIsStoppedByTheBudgetAndTheStateStaysUsable() throws {
        let lua = try LuaState(limits: Self.limits)
        try lua.run("function spin() while true do end end\nfunction ok() return 'fine' end", name: "@spin.lua")
        #expect(Self.failure(Self.call(lua, "spin"))?.kind == .budget)
        #expect(try Self.call(lua, "ok").get() == "fine")
        // Top-level code runs under the budget too.
        #expect(throws: LuaFailure.self) { try lua.run("repeat until false", name: "=top") }
    }

    @Test func allocatingTenGigabytesIsAMemoryErrorAndTheMemoryComesBack() throws {
        let lua = try LuaState(limits: LuaState.Limits(instructions: 10_000_000, memoryBytes: 8 << 20))
        try lua.run("""
            function huge() return #string.rep("x", 10 * 1024 * 1024 * 1024) end
            function big() return #string.rep("x", 1024 * 1024 * 1024) end
            function grow() local t = {} for i = 1, 1e9 do t[i] = {i} end end
            function ok() return #string.rep("x", 1024) end
            """, name: "@alloc.lua")
        // Lua refuses a string past 2 GB itself; below that, the allocator refuses past the limit.
        #expect(Self.failure(Self.call(lua, "huge"))?.message.hasSuffix("resulting string too large") == true)
        #expect(Self.failure(Self.call(lua, "big"))?.kind == .memory)
        #expect(Self.failure(Self.call(lua, "grow"))?.kind == .memory)
        #expect(lua.memoryUsed < 8 << 20)
        #expect(try Self.call(lua, "ok").get() == "1024")
    }

    @Test func anErrorSaysWhere() throws {
        let lua = try LuaState(limits: Self.limits)
        try lua.run("local n = 0\nfunction fail()\n  n = n + 1\n  error('broken ' .. n)\nend", name: "@fail.lua")
        for k in 1...3 {
            let failure = Self.failure(Self.call(lua, "fail"))
            #expect(failure?.kind == .runtime)
            #expect(failure?.message == "fail.lua:4: broken \(k)")
        }
    }
}
