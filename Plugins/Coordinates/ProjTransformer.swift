import CProj

/// A PROJ failure: what was being done and PROJ's own message.
public struct ProjError: Error, Sendable, CustomStringConvertible {
    /// What failed (`create`, `normalize`, `transform`).
    public let operation: String
    /// PROJ's message for its error number.
    public let message: String

    public var description: String { "PROJ \(operation): \(message)" }
}

/// A coordinate operation from one CRS to another through PROJ: the only file that talks to PROJ.
///
/// The context and the operation are created together and destroyed in `deinit`. Axis order is
/// normalised for visualisation (`proj_normalize_for_visualization`), so input is always
/// longitude, latitude (degrees) and projected output easting, northing (metres), whatever
/// order the EPSG definition declares.
///
/// `@unchecked Sendable`: a PJ_CONTEXT and its PJ must never be used by two threads at once.
/// Each transformer owns its own context, and its only user is one `CoordinatesTransform`, whose
/// calls the pipeline runtime serialises under that transform's lock (see `PositionTransform`);
/// the benchmark and tests use a transformer from one task only. Nothing mutable is exposed.
public final class ProjTransformer: @unchecked Sendable {
    private let context: OpaquePointer
    private let operation: OpaquePointer
    /// Whether the target CRS is a projected CRS (output in metres).
    public let targetIsProjected: Bool
    /// The target CRS's name as PROJ knows it (e.g. "WGS 84 / UTM zone 50N").
    public let targetName: String

    /// Creates the operation `source` → `target` (any CRS string PROJ accepts, e.g. `EPSG:32650`).
    public init(source: String, target: String) throws(ProjError) {
        guard let ctx = proj_context_create() else { throw ProjError(operation: "create", message: "cannot create a PROJ context") }
        // PROJ logs errors to stderr by default; ours go through the returned errors instead.
        proj_log_level(ctx, PJ_LOG_NONE)
        let raw = proj_create_crs_to_crs(ctx, source, target, nil)
        guard let raw else {
            let error = ProjTransformer.check(ctx, "create \(source) → \(target)")
            proj_context_destroy(ctx)
            throw error
        }
        let normalized = proj_normalize_for_visualization(ctx, raw)
        proj_destroy(raw)
        guard let normalized else {
            let error = ProjTransformer.check(ctx, "normalize \(source) → \(target)")
            proj_context_destroy(ctx)
            throw error
        }
        context = ctx
        operation = normalized
        if let crs = proj_create(ctx, target) {
            let type = proj_get_type(crs)
            targetIsProjected = type == PJ_TYPE_PROJECTED_CRS
            targetName = proj_get_name(crs).map { String(cString: $0) } ?? target
            proj_destroy(crs)
        } else {
            targetIsProjected = false
            targetName = target
        }
    }

    deinit {
        proj_destroy(operation)
        proj_context_destroy(context)
    }

    /// Transforms one point: longitude/latitude degrees in, x/y (easting/northing) out.
    public func forward(longitude: Double, latitude: Double) throws(ProjError) -> (x: Double, y: Double) {
        let input = PJ_COORD(xyzt: PJ_XYZT(x: longitude, y: latitude, z: 0, t: .infinity))
        let out = proj_trans(operation, PJ_FWD, input)
        let x = out.xyzt.x, y = out.xyzt.y
        guard x.isFinite, y.isFinite else {
            let error = ProjTransformer.check(context, "transform (\(longitude), \(latitude))", errno: proj_errno(operation))
            proj_errno_reset(operation)
            throw error
        }
        return (x, y)
    }

    /// The one check every PROJ failure goes through: PROJ's error number and message become a
    /// ``ProjError`` (`errno` nil: the context's last error). Uses `proj_context_errno_string`,
    /// the thread-safe successor of the deprecated `proj_errno_string`.
    private static func check(_ ctx: OpaquePointer, _ what: String, errno: Int32? = nil) -> ProjError {
        let code = errno ?? proj_context_errno(ctx)
        let message = code == 0
            ? "no result (point outside the CRS's domain?)"
            : proj_context_errno_string(ctx, code).map { String(cString: $0) } ?? "PROJ error \(code)"
        return ProjError(operation: what, message: message)
    }
}
