-- Wialon IPS (Gurtam's open text protocol, versions 1.1 and 2.0) for the `lua_tracker` source.
-- #TYPE#message\r\n; 2.0 adds a CRC-16/ARC over the message (to the last ';') as 4 hex digits.
-- Login L, short data SD, data D, black box B (answered once committed), ping P, driver
-- message M (answered at once). Commands: a message to the driver (M, which the device answers
-- AM) and custom lines. Docs/Plugins.md walks through it.

local function crc16(text)            -- CRC-16/ARC (IBM): reflected 0xA001, init 0
  local crc = 0
  for i = 1, #text do
    crc = crc ~ text:byte(i)
    for _ = 1, 8 do
      crc = (crc & 1 == 1) and ((crc >> 1) ~ 0xA001) or (crc >> 1)
    end
  end
  return crc
end

local function fields(text)            -- "a;b;;c" -> {"a", "b", "", "c"}
  local out = {}
  for field in (text .. ";"):gmatch("([^;]*);") do out[#out + 1] = field end
  return out
end

local function number(field) if field ~= "NA" then return tonumber(field) end end

local function degrees(value, hemisphere)   -- DDMM.MMMM / DDDMM.MMMM and N/S/E/W
  local v = number(value)
  if not v then return nil end
  local d = v // 100
  local result = d + (v - d * 100) / 60
  if hemisphere == "S" or hemisphere == "W" then result = -result end
  return result
end

local function days(y, m, d)           -- days since 1970-01-01 (civil calendar)
  if m <= 2 then y = y - 1 end
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
  return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
end

-- date;time;lat;N;lon;E;speed;course;height;sats[;hdop;inputs;outputs;adc;ibutton;params]
local function position(f)
  local d, mo, y = (f[1] or ""):match("^(%d%d)(%d%d)(%d%d)$")
  local h, mi, s = (f[2] or ""):match("^(%d%d)(%d%d)(%d%d)")
  local p = { lat = degrees(f[3], f[4]), lon = degrees(f[5], f[6]), attributes = {} }
  if d and h then
    p.time = ((days(2000 + y, tonumber(mo), tonumber(d)) * 24 + h) * 60 + mi) * 60000 + s * 1000
  end
  p.speed = number(f[7]) and number(f[7]) / 3.6
  p.course, p.alt, p.satellites, p.hdop = number(f[8]), number(f[9]), number(f[10]), number(f[11])
  p.mode = (p.lat and (p.satellites or 3) >= 3) and (p.alt and 3 or 2) or 1
  for name, kind, value in (f[16] or ""):gmatch("([^,:]+):(%d):([^,]*)") do
    p.attributes[name] = kind == "3" and value or tonumber(value)
  end
  return p
end

function frame(buffer)                 -- a message ends at \r\n; anything before a # is noise
  if buffer:byte(1) ~= 35 then
    local start = buffer:find("#", 2, true)
    return -((start or #buffer + 1) - 1)
  end
  local stop = buffer:find("\r\n", 1, true)
  return stop and stop + 1 or nil
end

function decode(bytes, session)
  local kind, message = bytes:match("^#(%u+)#(.-)\r\n$")
  if not kind then return { error = "syntax" } end
  local f = fields(message)
  if kind == "L" then                  -- 2.0: version;imei;password;crc  1.1: imei;password
    local imei = f[1] == "2.0" and f[2] or f[1]
    session.v2 = f[1] == "2.0"
    if session.v2 and tonumber(f[4], 16) ~= crc16(message:sub(1, #message - #f[4])) then
      return { error = "checksum" }
    end
    return { login = true, device = imei, answer = "#AL#1\r\n", refused = "#AL#0\r\n" }
  elseif kind == "P" then
    return { kind = "ping", answer = "#AP#\r\n" }
  elseif kind == "AM" then               -- the device's answer to our message: 1 shown, 0 not
    return { kind = "AM", reply = { command = "M", ok = message == "1", text = message == "1" and "shown" or "refused" } }
  end
  if session.v2 then                   -- the CRC follows the last ';' (a '|' in black boxes)
    local body, crc = message:match("^(.*[;|])(%x%x%x%x)$")
    if not body or tonumber(crc, 16) ~= crc16(body) then return { error = "checksum" } end
    message = body:sub(1, -2)
    f = fields(message)
  end
  if kind == "SD" or kind == "D" then
    return { kind = kind, positions = { position(f) }, answer = "#A" .. kind .. "#1\r\n" }
  elseif kind == "B" then
    local list = {}
    for item in (message .. "|"):gmatch("([^|]*)|") do
      if item ~= "" then list[#list + 1] = position(fields(item)) end
    end
    return { kind = "B", positions = list, answer = "#AB#" .. #list .. "\r\n" }
  elseif kind == "M" then
    return { kind = "message", answer = "#AM#1\r\n" }
  end
  return { kind = "other" }
end

-- Commands. A message to the driver goes as the device's own M packets do (with the CRC in
-- 2.0) and is answered AM; a custom command is a line the firmware takes as it is (Traccar's
-- "reboot", "VER?", "L1=1"), which the protocol does not answer: delivered once written.
command_types = { "text", "custom" }

function encode_command(command, session)
  if command.type == "text" then
    local text = command.text:gsub("[\r\n]", " ")
    if session.v2 then text = text .. ";" .. string.format("%04X", crc16(text .. ";")) end
    return "#M#" .. text .. "\r\n", "M"
  elseif command.type == "custom" and command.data then
    return command.data .. "\r\n", false
  end
  return nil                             -- not carried: the command fails with a reason
end
