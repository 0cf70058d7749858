/// A named area a component works with — a geofence, a corridor — as a view draws it.
///
/// A transform plugin offers its areas through ``TransformPlugin/areas(of:)``; the live map (and
/// any other view) reads them from every component of a pipeline without knowing its plugin.
/// Coordinates are latitude/longitude in ``datum`` (WGS84, GCJ-02 or BD-09): the view converts
/// them to the datum it draws in.
public struct Area: Sendable, Hashable {
    /// A point of an area's outline.
    public struct Point: Sendable, Hashable {
        public var latitude: Double
        public var longitude: Double

        public init(latitude: Double, longitude: Double) {
            self.latitude = latitude
            self.longitude = longitude
        }
    }

    public enum Shape: Sendable, Hashable {
        /// Polygons, each an outer ring then its holes; a ring is its vertices in order, not
        /// closed (the first vertex is not repeated at the end).
        case polygons([[[Point]]])
        /// Every point within `radiusMeters` of `center` (geodesic distance).
        case circle(center: Point, radiusMeters: Double)
    }

    public var id: String
    public var name: String?
    public var datum: Datum
    public var shape: Shape

    public init(id: String, name: String? = nil, datum: Datum, shape: Shape) {
        self.id = id
        self.name = name
        self.datum = datum
        self.shape = shape
    }
}
