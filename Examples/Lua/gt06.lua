-- The GT06 position path in Lua (78 78 frames: login, GPS/LBS reports, heartbeats), for the
-- `lua_tracker` source: what Benchmarks/lua.sh compares with the native `gt06` source.
-- Frame: 78 78 | length | protocol | content | serial (2) | CRC-ITU (2) | 0D 0A.

local crcTable = {}
for i = 0, 255 do                      -- CRC-16/X-25, reflected 0x8408
  local v = i
  for _ = 1, 8 do v = (v & 1 == 1) and ((v >> 1) ~ 0x8408) or (v >> 1) end
  crcTable[i] = v
end

local function crc(bytes, from, to)
  local c = 0xFFFF
  for i = from, to do c = (c >> 8) ~ crcTable[(c ~ bytes:byte(i)) & 0xFF] end
  return c ~ 0xFFFF
end

local function answer(protocol, serialHigh, serialLow)   -- 78 78 05 <protocol> <serial> <crc> 0D 0A
  local body = string.char(5, protocol, serialHigh, serialLow)
  local c = crc(body, 1, 4)
  return "\x78\x78" .. body .. string.char(c >> 8, c & 0xFF) .. "\r\n"
end

local function days(y, m, d)
  if m <= 2 then y = y - 1 end
  local era, yoe = y // 400, y % 400
  return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + (153 * ((m + 9) % 12) + 2) // 5 + d - 1 - 719468
end

function frame(buffer)
  if #buffer < 3 then return nil end
  if buffer:byte(1) ~= 0x78 or buffer:byte(2) ~= 0x78 then
    local start = buffer:find("\x78\x78", 2, true)
    return -((start or #buffer) - 1)
  end
  local total = buffer:byte(3) + 5
  if #buffer < total then return nil end
  return total
end

function decode(f, session)
  local n = #f
  if f:byte(n - 1) ~= 0x0D or f:byte(n) ~= 0x0A then return { error = "stop_bytes" } end
  local hi, lo = f:byte(n - 3, n - 2)
  if crc(f, 3, n - 4) ~= hi * 256 + lo then return { error = "checksum" } end
  local protocol, serialHigh, serialLow = f:byte(4), f:byte(n - 5), f:byte(n - 4)
  local ack = answer(protocol, serialHigh, serialLow)
  if protocol == 0x01 then             -- login: the IMEI in 8 bytes of BCD, a leading 0
    local imei = ("%02x%02x%02x%02x%02x%02x%02x%02x"):format(f:byte(5, 12)):sub(2)
    return { login = true, device = imei, answer = ack }
  elseif protocol == 0x12 or protocol == 0x22 or protocol == 0x16 or protocol == 0x26 then
    local y, mo, d, h, mi, s, info = f:byte(5, 11)
    local a, b, c, e = f:byte(12, 15)
    local lat = (((a << 8 | b) << 8 | c) << 8 | e) / 1800000
    a, b, c, e = f:byte(16, 19)
    local lon = (((a << 8 | b) << 8 | c) << 8 | e) / 1800000
    local speed, f1, f2 = f:byte(20, 22)
    local flags = f1 << 8 | f2
    if flags & 0x0400 == 0 then lat = -lat end
    if flags & 0x0800 ~= 0 then lon = -lon end
    return { kind = "position", answer = ack, positions = { {
      time = (((days(2000 + y, mo, d) * 24 + h) * 60 + mi) * 60 + s) * 1000,
      lat = lat, lon = lon, speed = speed / 3.6, course = flags & 0x03FF,
      satellites = info & 0x0F, mode = (flags & 0x1000 ~= 0) and 2 or 1 } } }
  elseif protocol == 0x13 or protocol == 0x23 then
    return { kind = "heartbeat", answer = ack }
  end
  return { kind = "other", answer = ack }
end
