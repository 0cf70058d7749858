import Foundation
import GatewayCore
import Geodesy
import SystemIO
import EnvironmentChecks

/// One fence as loaded: its id, optional name and shape (in the fence datum).
public struct Fence: Sendable, Hashable {
    /// Unique id from the feature's properties (or its GeoJSON `id`).
    public var id: String
    /// Display name, when the feature has one.
    public var name: String?
    /// Geometry in the configured fence datum.
    public var shape: FenceShape

    /// Creates a fence.
    public init(id: String, name: String?, shape: FenceShape) {
        self.id = id
        self.name = name
        self.shape = shape
    }
}

/// A loaded, indexed set of fences; immutable, so a reload swaps in a new one.
public struct FenceSet: Sendable {
    /// The fences in file order.
    public let fences: [Fence]
    /// R-tree over the fences' boxes; entry ids are offsets into ``fences``.
    public let index: FenceIndex
    /// Offset in ``fences`` by fence id.
    public let offsetById: [String: Int]

    /// Indexes the fences (ids must be unique; the loader checks).
    public init(_ fences: [Fence]) {
        self.fences = fences
        index = FenceIndex(fences.enumerated().map { (id: $0.offset, box: $0.element.shape.box) })
        var byId = [String: Int](minimumCapacity: fences.count)
        for (i, f) in fences.enumerated() { byId[f.id] = i }
        offsetById = byId
    }
}

/// Why a fence document could not be loaded; `path` is a JSON path inside the document.
public struct FenceLoadError: Error, Sendable, CustomStringConvertible {
    /// Where in the document, e.g. `features[3].geometry.coordinates`.
    public var path: String
    /// What is wrong.
    public var message: String

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Reads fences from GeoJSON: a FeatureCollection (or a single Feature) of Polygon and
/// MultiPolygon features, and Point features with a `radius` property in metres (circles).
public struct FenceLoader: Sendable {
    /// Property holding the fence id (falls back to the feature's GeoJSON `id`).
    public var idProperty: String
    /// Property holding the fence name (optional per feature).
    public var nameProperty: String

    /// Creates a loader with the property keys to read.
    public init(idProperty: String = "id", nameProperty: String = "name") {
        self.idProperty = idProperty
        self.nameProperty = nameProperty
    }

    /// Reads and parses a GeoJSON file; errors name its absolute path and the system's reason.
    ///
    /// `locgate validate` and the transform's start both load through here, so they agree.
    public func load(file path: String) throws(FenceLoadError) -> [Fence] {
        let shown = FileCheck.absolute(path)
        if let problem = FileCheck.readProblem(path) {
            throw FenceLoadError(path: "", message: "fence file: \(problem)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FenceLoadError(path: "", message: "fence file: cannot read \(shown): \(FileCheck.reason(errno))")
        }
        let value: JSONValue
        do { value = try JSONValue.parse([UInt8](data)) } catch {
            throw FenceLoadError(path: "", message: "fence file \(shown) is not valid JSON (GeoJSON expected): \(error)")
        }
        do { return try load(value) } catch {
            throw FenceLoadError(path: error.path, message: "\(error.message) (in \(shown))")
        }
    }

    /// Parses a GeoJSON document already decoded as JSON.
    public func load(_ document: JSONValue) throws(FenceLoadError) -> [Fence] {
        guard let object = document.objectValue else { throw FenceLoadError(path: "", message: "expected a GeoJSON object") }
        let features: [(String, JSONValue)]
        switch object["type"]?.stringValue {
        case "FeatureCollection":
            guard let list = object["features"]?.arrayValue else {
                throw FenceLoadError(path: "features", message: "expected an array of features")
            }
            features = list.enumerated().map { ("features[\($0.offset)]", $0.element) }
        case "Feature":
            features = [("", document)]
        default:
            throw FenceLoadError(path: "type", message: "expected \"FeatureCollection\" or \"Feature\"")
        }
        var fences = [Fence]()
        fences.reserveCapacity(features.count)
        var seen = [String: String]()
        for (path, feature) in features {
            let fence = try self.fence(feature, at: path)
            if let first = seen[fence.id] {
                throw FenceLoadError(path: path, message: "duplicate fence id \"\(fence.id)\" (also at \(first.isEmpty ? "the root" : first))")
            }
            seen[fence.id] = path
            fences.append(fence)
        }
        return fences
    }

    private func fence(_ value: JSONValue, at path: String) throws(FenceLoadError) -> Fence {
        func sub(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
        guard let feature = value.objectValue, feature["type"]?.stringValue == "Feature" else {
            throw FenceLoadError(path: path, message: "expected a Feature object")
        }
        let properties = feature["properties"]?.objectValue ?? JSONObject()
        guard let id = Self.text(properties[idProperty]) ?? Self.text(feature["id"]), !id.isEmpty else {
            throw FenceLoadError(path: sub("properties"), message: "no \"\(idProperty)\" property (and no feature id): every fence needs an id")
        }
        let name = Self.text(properties[nameProperty])
        guard let geometry = feature["geometry"]?.objectValue else {
            throw FenceLoadError(path: sub("geometry"), message: "expected a geometry object")
        }
        let coordinatesPath = sub("geometry.coordinates")
        let coordinates = geometry["coordinates"]
        let shape: FenceShape
        do {
            switch geometry["type"]?.stringValue {
            case "Polygon":
                guard let rings = Self.numbers3(coordinates) else { throw FenceLoadError(path: coordinatesPath, message: "expected [[[lon, lat], …], …]") }
                shape = .polygon(try Polygon(geoJSON: rings))
            case "MultiPolygon":
                guard let polygons = coordinates?.arrayValue?.compactMap(Self.numbers3), polygons.count == coordinates?.arrayValue?.count else {
                    throw FenceLoadError(path: coordinatesPath, message: "expected [[[[lon, lat], …], …], …]")
                }
                shape = .multiPolygon(try MultiPolygon(geoJSON: polygons))
            case "Point":
                guard let position = Self.numbers1(coordinates) else { throw FenceLoadError(path: coordinatesPath, message: "expected [lon, lat]") }
                guard let radius = properties["radius"]?.numberValue else {
                    throw FenceLoadError(path: sub("properties.radius"), message: "a Point fence needs a \"radius\" property in metres")
                }
                shape = .circle(try Circle(center: GeoPoint(geoJSON: position), radiusMeters: radius))
            case let other:
                throw FenceLoadError(path: sub("geometry.type"), message: "unsupported geometry \(other.map { "\"\($0)\"" } ?? "(none)"); use Polygon, MultiPolygon, or Point with a radius")
            }
        } catch let error as FenceLoadError {
            throw error
        } catch let error as GeometryError {
            throw FenceLoadError(path: coordinatesPath, message: "\(error)")
        } catch {
            throw FenceLoadError(path: coordinatesPath, message: "\(error)")
        }
        return Fence(id: id, name: name, shape: shape)
    }

    /// A string property, or a number written without a trailing `.0` for integers.
    static func text(_ value: JSONValue?) -> String? {
        // Booleans are not ids or names.
        if case .bool = value { return nil }
        return value?.scalarText
    }

    static func numbers1(_ v: JSONValue?) -> [Double]? {
        guard let a = v?.arrayValue else { return nil }
        let out = a.compactMap(\.numberValue)
        return out.count == a.count ? out : nil
    }

    static func numbers2(_ v: JSONValue?) -> [[Double]]? {
        guard let a = v?.arrayValue else { return nil }
        let out = a.compactMap(numbers1)
        return out.count == a.count ? out : nil
    }

    static func numbers3(_ v: JSONValue?) -> [[[Double]]]? {
        guard let a = v?.arrayValue else { return nil }
        let out = a.compactMap(numbers2)
        return out.count == a.count ? out : nil
    }
}
