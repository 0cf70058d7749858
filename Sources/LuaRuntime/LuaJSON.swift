import GatewayCore

/// JSON values as Lua values and back: per-device state saved by the state store.
///
/// Objects are tables with string keys, arrays tables with keys 1…n; a table with other keys
/// (numbers, booleans) keeps its string keys only. Functions and other values are not saved.
/// At most ``maxDepth`` levels and ``maxItems`` values, so a state that refers to itself or
/// grows without end is cut, not followed.
public enum LuaJSON {
    public static let maxDepth = 16
    public static let maxItems = 100_000

    /// Pushes `value`.
    public static func push(_ value: JSONValue, on stack: LuaStack) {
        switch value {
        case .null: stack.pushNil()
        case .bool(let b): stack.push(b)
        case .number(let n):
            if n.rounded() == n, abs(n) < 9.0e15 { stack.push(Int64(n)) } else { stack.push(n) }
        case .string(let s): stack.push(s)
        case .array(let items):
            stack.newTable(array: Int32(clamping: items.count))
            let table = stack.top
            for (k, item) in items.enumerated() {
                push(item, on: stack)
                stack.setIndex(Int64(k + 1), of: table)
            }
        case .object(let object):
            stack.newTable(fields: Int32(clamping: object.count))
            let table = stack.top
            for (key, item) in object {
                push(item, on: stack)
                stack.setField(key, of: table)
            }
        }
    }

    /// The value at `index` as JSON; nil for a value JSON cannot hold (a function at the top).
    public static func read(_ stack: LuaStack, at index: Int32) -> JSONValue? {
        var budget = maxItems
        return read(stack, at: index, depth: 0, budget: &budget)
    }

    private static func read(_ stack: LuaStack, at index: Int32, depth: Int, budget: inout Int) -> JSONValue? {
        budget -= 1
        guard budget >= 0 else { return nil }
        switch stack.kind(at: index) {
        case .nil, .none: return .null
        case .boolean: return .bool(stack.bool(at: index))
        case .number:
            guard let n = stack.number(at: index), n.isFinite else { return nil }
            return .number(n)
        case .string: return stack.string(at: index).map(JSONValue.string)
        case .table:
            guard depth < maxDepth else { return nil }
            let count = stack.length(at: index)
            if count > 0 {
                var items: [JSONValue] = []
                for k in 1...count {
                    let item = stack.withItem(Int64(k), of: index) { read(stack, at: $0, depth: depth + 1, budget: &budget) }
                    items.append(item ?? .null)
                }
                return .array(items)
            }
            var members: [(String, JSONValue)] = []
            stack.forEach(in: index) { key, value in
                if let name = stack.string(at: key), let item = read(stack, at: value, depth: depth + 1, budget: &budget) {
                    members.append((name, item))
                }
                return budget > 0
            }
            return .object(JSONObject(members.sorted { $0.0 < $1.0 }))
        default:
            return nil
        }
    }
}
