/// A geometry that cannot be built from the given coordinates.
///
/// The description is a fixed string per kind (usable as a metric label); ``ringIndex`` and
/// ``positionIndex`` say where the problem is when known.
public struct GeometryError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Sendable, Hashable {
        case malformedPosition
        case tooFewVertices
        case emptyPolygon
        case invalidRadius
    }

    private let code: Code
    /// Index of the ring (0 = outer, 1… = holes) within its polygon, when known.
    public var ringIndex: Int?
    /// Index of the offending position within its ring, when known.
    public var positionIndex: Int?
    /// Index of the polygon within a multipolygon, when known.
    public var polygonIndex: Int?

    private init(_ code: Code) { self.code = code }

    /// A position that is not `[lon, lat, …]` with finite numbers and |lat| ≤ 90.
    public static let malformedPosition = GeometryError(.malformedPosition)
    /// A ring with fewer than three distinct vertices.
    public static let tooFewVertices = GeometryError(.tooFewVertices)
    /// A polygon without an outer ring, or a multipolygon without polygons.
    public static let emptyPolygon = GeometryError(.emptyPolygon)
    /// A circle whose radius is negative or not finite.
    public static let invalidRadius = GeometryError(.invalidRadius)

    /// A short fixed description of the kind of problem.
    public var description: String {
        switch code {
        case .malformedPosition: "malformed position: expected [longitude, latitude] with |latitude| <= 90"
        case .tooFewVertices: "ring has fewer than 3 distinct vertices"
        case .emptyPolygon: "polygon has no rings"
        case .invalidRadius: "circle radius must be finite and >= 0"
        }
    }

    /// Equality compares the kind only, so `error == .tooFewVertices` reads naturally.
    public static func == (lhs: GeometryError, rhs: GeometryError) -> Bool { lhs.code == rhs.code }

    /// Hashes the kind only, consistent with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    func at(polygon: Int? = nil, ring: Int? = nil, position: Int? = nil) -> GeometryError {
        var e = self
        if let polygon { e.polygonIndex = polygon }
        if let ring { e.ringIndex = ring }
        if let position { e.positionIndex = position }
        return e
    }
}
