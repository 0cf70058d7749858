import GatewayCore

/// A check on a 2xx answer's JSON body, for servers that answer 200 with an error inside.
///
/// `{"path":"resultInteger","greater_than":0}` or `{"path":"code","equals":0}`; the path is
/// dot-separated object keys (array elements by index: `data.0.ok`).
public struct ResponsePredicate: Sendable {
    public enum Test: Sendable {
        case equals(JSONValue)
        case notEquals(JSONValue)
        case greaterThan(Double)
        case lessThan(Double)
    }

    public var path: [String]
    public var test: Test

    /// The names of the tests, as written in the configuration.
    static let testNames = ["equals", "not_equals", "greater_than", "less_than"]

    /// True when `body` is JSON and the value at ``path`` passes ``test``.
    public func accepts(_ body: [UInt8]) -> Bool {
        guard let root = try? JSONValue.parse(body) else { return false }
        var v: JSONValue? = root
        for key in path {
            switch v {
            case .object(let o)?: v = o[key]
            case .array(let a)?: v = Int(key).flatMap { a.indices.contains($0) ? a[$0] : nil }
            default: v = nil
            }
        }
        guard let value = v else { return false }
        switch test {
        case .equals(let expected): return value == expected
        case .notEquals(let other): return value != other
        case .greaterThan(let n): return (value.numberValue ?? Double(value.stringValue ?? "")).map { $0 > n } ?? false
        case .lessThan(let n): return (value.numberValue ?? Double(value.stringValue ?? "")).map { $0 < n } ?? false
        }
    }

    /// Text for logs: `resultInteger > 0`.
    public var description: String {
        let p = path.joined(separator: ".")
        switch test {
        case .equals(let v): return "\(p) == \(v.jsonText)"
        case .notEquals(let v): return "\(p) != \(v.jsonText)"
        case .greaterThan(let n): return "\(p) > \(JSONValue.number(n).jsonText)"
        case .lessThan(let n): return "\(p) < \(JSONValue.number(n).jsonText)"
        }
    }
}
