import GatewayCore

/// Positions as Lua tables, the form scripts see and return:
///
///     { time = 1700000000000,            -- ms since 1970 (UTC), or nil
///       lat = 46.0569, lon = 14.5058,    -- degrees in `datum`
///       alt = 295.0, speed = 1.2,        -- metres, m/s
///       course = 270.0, mode = 3,        -- degrees; 1 no fix, 2 2D, 3 3D
///       satellites = 9, hdop = 0.9,
///       device = "van-4", source = "coban", datum = "wgs84",
///       attributes = { ignition = "true", power = "13.8" },
///       event = { type = "enter", fence = "depot", name = "Depot" } }   -- or nil
///
/// A script may change any field, drop one (nil), or build new positions; attribute values it
/// sets become text (`12.5` → `"12.5"`, `true` → `"true"`). A position's `id` is not shown:
/// locgate keeps it (an id is what downstream recognises a resent position by), and new
/// positions get the source's.
public enum LuaPosition {
    /// Pushes `position` as a new table.
    public static func push(_ position: Position, on stack: LuaStack) {
        stack.newTable(fields: 16)
        let table = stack.top
        func set(_ name: StaticString, _ value: Double?) {
            guard let value else { return }
            stack.push(value)
            stack.setField(name, of: table)
        }
        if let time = position.time {
            stack.push(time.milliseconds)
            stack.setField("time", of: table)
        }
        set("lat", position.latitude)
        set("lon", position.longitude)
        set("alt", position.altitude)
        set("speed", position.speed)
        set("course", position.course)
        set("hdop", position.hdop)
        if let satellites = position.satellites {
            stack.push(Int64(satellites))
            stack.setField("satellites", of: table)
        }
        stack.push(Int64(position.mode.rawValue))
        stack.setField("mode", of: table)
        if let device = position.device, !device.isEmpty {
            stack.push(device)
            stack.setField("device", of: table)
        }
        if !position.source.isEmpty {
            stack.push(position.source)
            stack.setField("source", of: table)
        }
        stack.push(position.datum.name)
        stack.setField("datum", of: table)
        stack.newTable(fields: Int32(position.attributes.count))
        let attributes = stack.top
        for (key, value) in position.attributes {
            stack.push(value)
            stack.setField(key, of: attributes)
        }
        stack.setField("attributes", of: table)
        if let event = position.event {
            stack.newTable(fields: 4)
            let e = stack.top
            for (name, value) in [("type", event.kind.rawValue), ("fence", event.fenceId), ("name", event.fenceName), ("status", event.status)] as [(StaticString, String?)] {
                guard let value else { continue }
                stack.push(value)
                stack.setField(name, of: e)
            }
            stack.setField("event", of: table)
        }
    }

    /// The positions a script returned at `index`: a position table, a list of them, or
    /// nil/false for none. `original` gives what the tables do not say (its id, source and
    /// datum when unchanged). Nil when the value is none of these (a bad return).
    public static func read(_ stack: LuaStack, at index: Int32, original: Position) -> [Position]? {
        switch stack.kind(at: index) {
        case .nil, .none: return []
        case .boolean: return stack.bool(at: index) ? nil : []
        case .table: break
        default: return nil
        }
        // A list when its first item is a table.
        let isList = stack.withItem(1, of: index) { stack.kind(at: $0) == .table }
        guard isList else { return position(stack, at: index, original: original).map { [$0] } }
        var out: [Position] = []
        let count = stack.length(at: index)
        guard count <= 10_000 else { return nil }
        for item in 0..<count {
            guard let p = stack.withItem(Int64(item + 1), of: index, { position(stack, at: $0, original: original) }) else { return nil }
            out.append(p)
        }
        return out
    }

    /// One position table; nil when a field has the wrong type or is off the Earth.
    static func position(_ stack: LuaStack, at index: Int32, original: Position) -> Position? {
        guard stack.kind(at: index) == .table else { return nil }
        var p = original
        var ok = true
        // The field's new value (`.some(nil)` when the script removed it); nil when it is not a number.
        func number(_ name: StaticString) -> Double?? {
            stack.withField(name, of: index) { field -> Double?? in
                switch stack.kind(at: field) {
                case .nil: return .some(nil)
                case .number:
                    guard let value = stack.number(at: field), value.isFinite else { break }
                    return .some(value)
                default: break
                }
                ok = false
                return nil
            }
        }
        p.time = stack.withField("time", of: index) { field in stack.integer(at: field).map(Timestamp.init(milliseconds:)) }
        if let value = number("lat") { p.latitude = value }
        if let value = number("lon") { p.longitude = value }
        if let value = number("alt") { p.altitude = value }
        if let value = number("speed") { p.speed = value }
        if let value = number("course") { p.course = value }
        if let value = number("hdop") { p.hdop = value }
        p.satellites = stack.withField("satellites", of: index) { stack.integer(at: $0).map(Int.init) }.flatMap { (0...Position.maximumSatellites).contains($0) ? $0 : nil }
        if let mode = stack.withField("mode", of: index, { stack.integer(at: $0) }) { p.mode = FixMode(rawValue: Int(mode)) ?? p.mode }
        // The device and datum, read only when the script changed them.
        stack.withField("device", of: index) { field in
            guard stack.kind(at: field) == .string, !stack.string(at: field, equals: original.device ?? "") else { return }
            p.device = stack.string(at: field).flatMap { $0.isEmpty ? nil : $0 }
        }
        stack.withField("datum", of: index) { field in
            guard stack.kind(at: field) == .string, !stack.string(at: field, equals: original.datum.name),
                  let parsed = stack.string(at: field).flatMap(Datum.init(parsing:)) else { return }
            p.datum = parsed
        }
        p.attributes = stack.withField("attributes", of: index) { attributes($0, stack, original: original.attributes) }
        p.event = stack.withField("event", of: index) { event($0, stack) }
        guard ok, (p.latitude == nil) == (p.longitude == nil) else { return nil }
        if p.datum.isGeographic, let lat = p.latitude, let lon = p.longitude, abs(lat) > 90 || abs(lon) > 180 { return nil }
        return p
    }

    /// The attributes table as strings. Starts from the position's own attributes and writes
    /// only what the script changed (a dictionary built anew for every position costs more than
    /// the script's call).
    static func attributes(_ index: Int32, _ stack: LuaStack, original: [String: String]) -> [String: String] {
        guard stack.kind(at: index) == .table else { return [:] }
        var out = original
        var kept = 0, entries = 0
        stack.forEach(in: index) { key, value in
            entries += 1
            guard let name = stack.string(at: key) else { return true }
            if let old = original[name] {
                kept += 1
                if stack.kind(at: value) == .string, stack.string(at: value, equals: old) { return true }
            }
            if let text = stack.text(at: value) { out[name] = text } else { out[name] = nil }
            return entries < 1_000
        }
        if kept < original.count {
            // The script removed some: keep only the keys the table has.
            for name in original.keys where stack.withKey(name, of: index, { stack.kind(at: $0) == .nil }) {
                out[name] = nil
            }
        }
        return out
    }

    static func event(_ index: Int32, _ stack: LuaStack) -> PositionEvent? {
        guard stack.kind(at: index) == .table,
              let kind = stack.withField("type", of: index, { stack.string(at: $0) }).flatMap(PositionEvent.Kind.init(rawValue:))
        else { return nil }
        return PositionEvent(kind: kind, fenceId: stack.withField("fence", of: index) { stack.string(at: $0) },
                             fenceName: stack.withField("name", of: index) { stack.string(at: $0) },
                             status: stack.withField("status", of: index) { stack.string(at: $0) })
    }
}
