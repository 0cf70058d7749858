/// A latitude/longitude bounding box that may cross the antimeridian.
///
/// Longitudes are stored unwrapped: ``minLongitude`` is in -180..<180 and ``maxLongitude`` in
/// `minLongitude...minLongitude + 360`, so a box across the antimeridian from 170° E to
/// 170° W has `minLongitude` 170 and `maxLongitude` 190. A box 360° or more wide is the
/// whole band -180...180. Point and box tests treat longitude as circular (180 ≡ -180).
public struct GeoBox: Sendable, Hashable {
    /// Southern edge in degrees.
    public private(set) var minLatitude: Double
    /// Northern edge in degrees.
    public private(set) var maxLatitude: Double
    /// Western edge in degrees, -180..<180.
    public private(set) var minLongitude: Double
    /// Eastern edge in degrees, unwrapped: up to `minLongitude + 360`.
    public private(set) var maxLongitude: Double

    /// Creates a box; `maxLongitude < minLongitude` means the box crosses the antimeridian
    /// (the GeoJSON `bbox` convention), and any unwrapped range is accepted too (170...190).
    public init(minLatitude: Double, maxLatitude: Double, minLongitude: Double, maxLongitude: Double) {
        self.minLatitude = min(minLatitude, maxLatitude)
        self.maxLatitude = max(minLatitude, maxLatitude)
        var width = maxLongitude - minLongitude
        if width < 0 { width += 360 }
        if !(width < 360) {
            // Also catches NaN: an unknown extent must not exclude anything.
            self.minLongitude = -180
            self.maxLongitude = 180
        } else {
            let west = normalizeLongitude(minLongitude)
            self.minLongitude = west
            self.maxLongitude = west + width
        }
    }

    /// The box covering every point on Earth.
    public static let world = GeoBox(minLatitude: -90, maxLatitude: 90, minLongitude: -180, maxLongitude: 180)

    /// Whether the box extends east of 180°.
    @inlinable public var crossesAntimeridian: Bool { maxLongitude > 180 }

    /// Width in degrees of longitude.
    @inlinable public var longitudeSpan: Double { maxLongitude - minLongitude }

    /// Whether the point lies in the box, edges included (longitude taken modulo 360).
    @inlinable
    public func contains(_ point: GeoPoint) -> Bool {
        guard point.latitude >= minLatitude && point.latitude <= maxLatitude else { return false }
        let x = normalizeLongitude(point.longitude)
        // minLongitude ≥ -180 and maxLongitude < 540, so x and x + 360 are the only candidates.
        return (x >= minLongitude && x <= maxLongitude) || (x + 360 >= minLongitude && x + 360 <= maxLongitude)
    }

    /// Whether two boxes share at least one point, edges included (longitude circular).
    @inlinable
    public func intersects(_ other: GeoBox) -> Bool {
        guard other.minLatitude <= maxLatitude && other.maxLatitude >= minLatitude else { return false }
        return GeoBox.longitudeOverlap(minLongitude, maxLongitude, other.minLongitude, other.maxLongitude, shift: -360)
            || GeoBox.longitudeOverlap(minLongitude, maxLongitude, other.minLongitude, other.maxLongitude, shift: 0)
            || GeoBox.longitudeOverlap(minLongitude, maxLongitude, other.minLongitude, other.maxLongitude, shift: 360)
    }

    /// Whether `[a0, a1]` overlaps `[b0, b1]` shifted by `shift` degrees.
    @inlinable
    static func longitudeOverlap(_ a0: Double, _ a1: Double, _ b0: Double, _ b1: Double, shift: Double) -> Bool {
        b0 + shift <= a1 && b1 + shift >= a0
    }

    /// The smallest box (on the longitude circle) containing both boxes.
    public func union(_ other: GeoBox) -> GeoBox {
        let south = min(minLatitude, other.minLatitude), north = max(maxLatitude, other.maxLatitude)
        // The smallest covering arc of two arcs starts at one of their western edges.
        func cover(from a: GeoBox, _ b: GeoBox) -> Double {
            var offset = (b.minLongitude - a.minLongitude).truncatingRemainder(dividingBy: 360)
            if offset < 0 { offset += 360 }
            return max(a.longitudeSpan, offset + b.longitudeSpan)
        }
        let eastOfSelf = cover(from: self, other), eastOfOther = cover(from: other, self)
        if eastOfSelf <= eastOfOther {
            return GeoBox(minLatitude: south, maxLatitude: north, minLongitude: minLongitude, maxLongitude: minLongitude + min(eastOfSelf, 360))
        }
        return GeoBox(minLatitude: south, maxLatitude: north, minLongitude: other.minLongitude, maxLongitude: other.minLongitude + min(eastOfOther, 360))
    }

    /// The box grown by `degrees` on every side (latitudes kept within ±90; 360° or more wide is
    /// every longitude).
    public func expanded(byDegrees degrees: Double) -> GeoBox {
        guard degrees > 0 else { return self }
        return GeoBox(south: max(-90, minLatitude - degrees), north: min(90, maxLatitude + degrees),
                      unwrappedWest: minLongitude - degrees, east: maxLongitude + degrees)
    }

    /// The box grown by `metres` on every side (conservative; widens to all longitudes near the poles).
    public func expanded(byMetres metres: Double) -> GeoBox {
        guard metres > 0 else { return self }
        let dLat = metres / WGS84.metresPerDegree(atLatitude: 0).latitude
        let south = max(-90, minLatitude - dLat), north = min(90, maxLatitude + dLat)
        // The longitude degree is shortest at the box edge nearest a pole.
        let polar = max(abs(south), abs(north))
        guard polar < 89.9 else {
            return GeoBox(minLatitude: south, maxLatitude: north, minLongitude: -180, maxLongitude: 180)
        }
        let dLon = metres / WGS84.metresPerDegree(atLatitude: polar).longitude
        return GeoBox(minLatitude: south, maxLatitude: north, minLongitude: minLongitude - dLon, maxLongitude: maxLongitude + dLon)
    }

    /// A box from an unwrapped longitude range (west may be below -180).
    init(south: Double, north: Double, unwrappedWest west: Double, east: Double) {
        if east - west >= 360 {
            self.init(minLatitude: south, maxLatitude: north, minLongitude: -180, maxLongitude: 180)
        } else {
            let normalizedWest = normalizeLongitude(west)
            self.init(minLatitude: south, maxLatitude: north, minLongitude: normalizedWest, maxLongitude: normalizedWest + (east - west))
        }
    }
}
