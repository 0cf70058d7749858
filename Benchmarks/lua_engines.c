// The C driver behind LuaState.swift's choice of Lua 5.4 over LuaJIT: the same two workloads
// through each engine's C API, one million calls each, with a count hook set as the sandbox
// sets it: a transform call (a position table built, one attribute computed, the result read
// back) and a GT06 position frame decoded by a script. Benchmarks/lua.sh builds and runs it
// when both -dev packages are installed (LuaJIT's is not in the Makefile: only this needs it).
//
//   gcc -O2 -I/usr/include/lua5.4 lua_engines.c -llua5.4 && ./a.out
//   gcc -O2 -DLUAJIT -I/usr/include/luajit-2.1 lua_engines.c -lluajit-5.1 && ./a.out 1   # JIT on (0: off)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#ifdef LUAJIT
#include "luajit.h"
#endif
static size_t used;
static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud; if (ptr) used -= osize;
  if (nsize == 0) { free(ptr); return NULL; }
  void *p = realloc(ptr, nsize); if (p) used += nsize; return p;
}
static void hook(lua_State *L, lua_Debug *ar) { (void)L; (void)ar; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static const char *script =
 "function process(p, state)\n"
 "  local v = tonumber(p.attributes.power) or 0\n"
 "  p.attributes.ignition = v > 13 and 'true' or 'false'\n"
 "  return p\n"
 "end\n"
 "function decode(f)\n"
 "  local b1,b2,len,proto = f:byte(1,4)\n"
 "  if b1 ~= 0x78 or b2 ~= 0x78 then return nil end\n"
 "  local y,mo,d,h,mi,s,info = f:byte(5,11)\n"
 "  local a,b,c,e = f:byte(12,15) local lat = ((a*256+b)*256+c)*256+e\n"
 "  a,b,c,e = f:byte(16,19) local lon = ((a*256+b)*256+c)*256+e\n"
 "  local speed, f1, f2 = f:byte(20,22) local flags = f1*256+f2\n"
 "  lat = lat/1800000 lon = lon/1800000\n"
 "  if flags & 0x0400 == 0 then lat = -lat end\n"
 "  if flags & 0x0800 ~= 0 then lon = -lon end\n"
 "  return { time = os_time(2000+y,mo,d,h,mi,s), lat = lat, lon = lon, speed = speed/3.6, course = flags & 0x3FF, valid = flags & 0x1000 ~= 0 }\n"
 "end\n";
int main(int argc, char **argv) {
  int jit = argc > 1 ? atoi(argv[1]) : 1;
  lua_State *L = lua_newstate(alloc, NULL);
  int custom = L != NULL;
  if (!L) L = luaL_newstate();
  luaL_openlibs(L);
#ifdef LUAJIT
  luaJIT_setmode(L, 0, jit ? LUAJIT_MODE_ON : LUAJIT_MODE_OFF);
  const char *s2 = "local bit=require('bit') " ; (void)s2;
#endif
  lua_sethook(L, hook, LUA_MASKCOUNT, 1000);
  // os_time: days from civil, in Lua
  const char *helper = "function os_time(y,m,d,h,mi,s) if m<=2 then y=y-1 end local era=(y>=0 and y or y-399)//400 local yoe=y-era*400 local mp=(m+9)%12 local doy=(153*mp+2)//5+d-1 local doe=yoe*365+yoe//4-yoe//100+doy return ((era*146097+doe-719468)*86400+h*3600+mi*60+s)*1000 end";
  const char *src = script;
#ifdef LUAJIT
  // LuaJIT (5.1) has no integer division or bitwise operators: use bit and math.floor
  helper = "local bit=require('bit') local fl=math.floor function os_time(y,m,d,h,mi,s) if m<=2 then y=y-1 end local era=fl((y>=0 and y or y-399)/400) local yoe=y-era*400 local mp=(m+9)%12 local doy=fl((153*mp+2)/5)+d-1 local doe=yoe*365+fl(yoe/4)-fl(yoe/100)+doy return ((era*146097+doe-719468)*86400+h*3600+mi*60+s)*1000 end";
  src =
 "local band=bit.band\n"
 "function process(p, state)\n"
 "  local v = tonumber(p.attributes.power) or 0\n"
 "  p.attributes.ignition = v > 13 and 'true' or 'false'\n"
 "  return p\n"
 "end\n"
 "function decode(f)\n"
 "  local b1,b2,len,proto = f:byte(1,4)\n"
 "  if b1 ~= 0x78 or b2 ~= 0x78 then return nil end\n"
 "  local y,mo,d,h,mi,s,info = f:byte(5,11)\n"
 "  local a,b,c,e = f:byte(12,15) local lat = ((a*256+b)*256+c)*256+e\n"
 "  a,b,c,e = f:byte(16,19) local lon = ((a*256+b)*256+c)*256+e\n"
 "  local speed, f1, f2 = f:byte(20,22) local flags = f1*256+f2\n"
 "  lat = lat/1800000 lon = lon/1800000\n"
 "  if band(flags,0x0400) == 0 then lat = -lat end\n"
 "  if band(flags,0x0800) ~= 0 then lon = -lon end\n"
 "  return { time = os_time(2000+y,mo,d,h,mi,s), lat = lat, lon = lon, speed = speed/3.6, course = band(flags,0x3FF), valid = band(flags,0x1000) ~= 0 }\n"
 "end\n";
#endif
  if (luaL_dostring(L, helper) || luaL_dostring(L, src)) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); return 1; }
  int n = 1000000;
  double t0 = now(); double acc = 0;
  for (int i = 0; i < n; i++) {
    lua_getglobal(L, "process");
    lua_createtable(L, 0, 8);
    lua_pushinteger(L, 1700000000000LL + i); lua_setfield(L, -2, "time");
    lua_pushnumber(L, 22.5 + i * 1e-7); lua_setfield(L, -2, "lat");
    lua_pushnumber(L, 114.0); lua_setfield(L, -2, "lon");
    lua_pushnumber(L, 3.5); lua_setfield(L, -2, "speed");
    lua_pushnumber(L, 90); lua_setfield(L, -2, "course");
    lua_createtable(L, 0, 4);
    lua_pushstring(L, "13.8"); lua_setfield(L, -2, "power");
    lua_pushstring(L, "north"); lua_setfield(L, -2, "fleet");
    lua_setfield(L, -2, "attributes");
    lua_pushnil(L);
    if (lua_pcall(L, 2, 1, 0)) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); return 1; }
    lua_getfield(L, -1, "lat"); acc += lua_tonumber(L, -1); lua_pop(L, 1);
    lua_getfield(L, -1, "lon"); acc += lua_tonumber(L, -1); lua_pop(L, 1);
    lua_getfield(L, -1, "attributes");
    lua_pushnil(L); while (lua_next(L, -2)) { size_t len; lua_tolstring(L, -1, &len); acc += len; lua_pop(L, 1); }
    lua_pop(L, 2);
  }
  double t1 = now();
  unsigned char frame[] = {0x78,0x78,0x23,0x12,0x0f,0x08,0x1b,0x12,0x1d,0x37,0xcb,0x01,0xc8,0xe2,0xcc,0x08,0xaf,0xd3,0xc0,0x20,0xd5,0x02,0x01,0x94,0x07,0x01,0xd6,0x00,0xa1,0x19,0x00,0x41,0xee,0x10,0x05,0x76,0xd1,0x47,0x0d,0x0a};
  for (int i = 0; i < n; i++) {
    lua_getglobal(L, "decode");
    frame[10] = (unsigned char)(i & 0x3f);
    lua_pushlstring(L, (const char *)frame, sizeof frame);
    if (lua_pcall(L, 1, 1, 0)) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); return 1; }
    lua_getfield(L, -1, "lat"); acc += lua_tonumber(L, -1); lua_pop(L, 1);
    lua_getfield(L, -1, "lon"); acc += lua_tonumber(L, -1); lua_pop(L, 1);
    lua_getfield(L, -1, "time"); acc += lua_tonumber(L, -1); lua_pop(L, 1);
    lua_pop(L, 1);
  }
  double t2 = now();
  printf("%s jit=%d custom_alloc=%d: transform %.0f calls/s (%.2f us), decode %.0f frames/s (%.2f us) [%g]\n",
#ifdef LUAJIT
   "luajit",
#else
   "lua5.4",
#endif
   jit, custom, n/(t1-t0), (t1-t0)/n*1e6, n/(t2-t1), (t2-t1)/n*1e6, acc);
  return 0;
}
