/// A parsed JSON document that keeps object keys in their written order.
///
/// The configuration loader needs key order (errors are reported in file order) and exact
/// number/bool distinction, which `JSONSerialization` blurs on Linux; gpsd reports and
/// JSON Lines input are parsed with the same small byte-level parser.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A short name of the value's kind for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }

    /// A string, number or boolean as text (whole numbers without `.0`), for values that are
    /// strings to us but may be written as numbers (attributes, ids); nil for other kinds.
    public var scalarText: String? {
        switch self {
        case .string(let s): return s
        case .number(let n): return n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b): return String(b)
        default: return nil
        }
    }
    public var numberValue: Double? { if case .number(let n) = self { return n }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var objectValue: JSONObject? { if case .object(let o) = self { return o }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }

    /// The same value with every object's keys sorted, so two documents that differ only in key
    /// order compare equal (configuration reloads compare components this way).
    public var sortingKeys: JSONValue {
        switch self {
        case .array(let a): return .array(a.map(\.sortingKeys))
        case .object(let o): return .object(JSONObject(o.members.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sortingKeys) }))
        default: return self
        }
    }
}

/// A JSON object: ordered members with a lookup by key (last duplicate wins, as in most parsers).
public struct JSONObject: Sendable, Hashable, Sequence {
    public private(set) var members: [(key: String, value: JSONValue)] = []

    public init() {}

    public init(_ members: [(String, JSONValue)]) {
        guard members.count > Self.linearLookupLimit else {
            for (k, v) in members { self[k] = v }
            return
        }
        // A search of the members per member made 4,096 members 8 million key comparisons:
        // long lists find their duplicates through an index (last wins, at the first one's place).
        var index = [String: Int](minimumCapacity: members.count)
        self.members.reserveCapacity(members.count)
        for (k, v) in members {
            if let i = index[k] { self.members[i].value = v } else {
                index[k] = self.members.count
                self.members.append((k, v))
            }
        }
    }

    /// Members up to which building an object looks keys up by searching the members; beyond
    /// it, by an index (hashing every key costs more than a search of a few members).
    static let linearLookupLimit = 16

    /// Appends a member whose key the caller has checked is not there yet (the parser's index).
    mutating func appendNewMember(_ key: String, _ value: JSONValue) { members.append((key, value)) }

    /// Replaces the value of the member at `index` (a duplicate key, the last value winning).
    mutating func replaceValue(at index: Int, with value: JSONValue) { members[index].value = value }

    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        a.members.count == b.members.count && zip(a.members, b.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into h: inout Hasher) {
        for m in members { h.combine(m.key); h.combine(m.value) }
    }

    public var keys: [String] { members.map(\.key) }
    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }

    public subscript(key: String) -> JSONValue? {
        get { members.last(where: { $0.key == key })?.value }
        set {
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let v = newValue { members[i].value = v } else { members.remove(at: i) }
            } else if let v = newValue {
                members.append((key, v))
            }
        }
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { members.makeIterator() }
}
