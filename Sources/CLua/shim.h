// Lua 5.4 (Debian liblua5.4-dev), the interpreter of scripted transforms and device protocols.
// Only Sources/LuaRuntime/LuaState.swift talks to it.
#include <stdlib.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

// What a state may allocate: the allocator refuses a block that would take `used` past `limit`,
// and Lua turns the refusal into a memory error the script's call returns (never an abort).
typedef struct {
    size_t used;
    size_t limit;
} locgate_lua_memory;

// The allocator (lua_Alloc) keeping that count. In C because Lua calls it from inside the VM.
static void *locgate_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    locgate_lua_memory *memory = (locgate_lua_memory *)ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        memory->used -= old;
        return NULL;
    }
    if (nsize > old && memory->used - old + nsize > memory->limit) return NULL;
    void *block = realloc(ptr, nsize);
    if (block) memory->used = memory->used - old + nsize;
    return block;
}

// The instruction budget: a count hook that raises an error the first time it fires. luaL_error
// unwinds with longjmp to the lua_pcall that runs the script, so no Swift frame may stand
// between them: the hook is C.
static void locgate_lua_budget_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    luaL_error(L, "instruction budget exceeded");
}

// Sets the budget for the next call (instructions); 0 removes it.
static inline void locgate_lua_set_budget(lua_State *L, int instructions) {
    lua_sethook(L, instructions > 0 ? locgate_lua_budget_hook : NULL, instructions > 0 ? LUA_MASKCOUNT : 0, instructions);
}

// Function-like macros and variadic functions Swift cannot call.
static inline int locgate_lua_pcall(lua_State *L, int arguments, int results) { return lua_pcall(L, arguments, results, 0); }
static inline void locgate_lua_pop(lua_State *L, int n) { lua_pop(L, n); }
static inline int locgate_lua_registry_index(void) { return LUA_REGISTRYINDEX; }
static inline int locgate_lua_collect(lua_State *L) { return lua_gc(L, LUA_GCCOLLECT, 0); }
