import GatewayCore
import Geodesy
import Locking

/// The pipeline components `locgate map` borrows: the `file` source reads each input and one
/// `geofence` transform per fence file gives the events. Both come from the plugin registry,
/// prepared from option objects as a pipeline file's components are, so the map runs the same
/// code as a pipeline without naming a plugin's types.
enum MapComponents {
    /// Why a component could not be prepared: each problem's path (inside the option object) and message.
    struct Problems: Error {
        var problems: [ConfigurationProblem]
    }

    /// Reads `options` with the plugin of `kind` and `type`, as `PipelineConfiguration.load` reads
    /// a component; any problem (an unknown option included) fails.
    static func prepare(_ kind: ComponentKind, _ type: String, options: [(String, JSONValue)],
                        registry: PluginRegistry) throws(Problems) -> PreparedComponent {
        guard let plugin = registry.plugin(kind: kind, type: type) else {
            throw Problems(problems: [ConfigurationProblem(path: "type", message: "no \(kind.rawValue) plugin \"\(type)\" in this binary")])
        }
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: JSONObject(options), path: "", diagnostics: diagnostics)
        let prepared = plugin.prepare(&reader)
        reader.finish()
        guard diagnostics.isEmpty else { throw Problems(problems: diagnostics.problems) }
        return prepared
    }

    /// The `file` source's options for reading `path` whole in `format`, quietly.
    static func fileOptions(path: String, format: InputFormat) -> [(String, JSONValue)] {
        [("path", .string(literal(path))), ("format", .string(format.rawValue)), ("progress", .bool(false))]
    }

    /// The `geofence` transform's options for the map's events: `fences` (a parsed GeoJSON
    /// document) in `datum`, enter and exit with the transform's defaults, every position passed.
    static func geofenceOptions(fences: JSONValue, datum: String) -> [(String, JSONValue)] {
        [("fences", fences), ("fence_datum", .string(datum)), ("action", .string("annotate")),
         ("events", .array([.string("enter"), .string("exit")]))]
    }

    /// `text` as an option string that reads back as itself: option strings substitute
    /// `${NAME}`, and a file name may hold `${`; `${_:-$}` is an unset variable's default, `$`.
    static func literal(_ text: String) -> String {
        text.replacing("${", with: "${_:-$}{")
    }

    /// What an input's format is called, as the `file` source's `format` option spells it.
    enum InputFormat: String {
        case nmea, jsonl, gpx

        /// The format the extension implies, by the `file` source's rule: .jsonl/.json → jsonl,
        /// .gpx → gpx, anything else → nmea. Given to the source explicitly, so the map's
        /// messages name the format the file was read as.
        init(forPath path: String) {
            let lower = path.lowercased()
            self = lower.hasSuffix(".jsonl") || lower.hasSuffix(".json") ? .jsonl : lower.hasSuffix(".gpx") ? .gpx : .nmea
        }
    }
}

/// Runs positions through the fence transforms as a source emits them, keeping each event, and
/// folds each position into the current input's tracks. The source emits one batch at a time;
/// the lock is there because its output is `Sendable`.
final class MapCollector: Sendable {
    private struct State {
        var transforms: [any PositionTransform]
        /// Every event, in the order the transforms emitted them.
        var events: [Position] = []
        var tracks: TrackFold
        var scratch: [Position] = []
    }

    private let state: Locked<State>
    private let display: ChinaDatums.Datum

    init(transforms: [any PositionTransform], display: ChinaDatums.Datum) {
        self.display = display
        state = Locked(State(transforms: transforms, tracks: TrackFold(display: display)))
    }

    /// Runs `batch` through every transform (each sees every position, as in a pipeline) and adds
    /// each position to the current input's tracks.
    func take(_ batch: [Position]) {
        state.withLock { s in
            for position in batch {
                for t in s.transforms.indices {
                    s.scratch.removeAll(keepingCapacity: true)
                    s.transforms[t].process(position, into: &s.scratch)
                    for e in s.scratch where e.event != nil { s.events.append(e) }
                }
                s.tracks.add(position)
            }
        }
    }

    /// The events so far and the current input's tracks; the next input starts with none.
    func endInput() -> (events: [Position], tracks: TrackFold) {
        state.withLock { s in
            defer {
                s.events = []
                s.tracks = TrackFold(display: display)
            }
            return (s.events, s.tracks)
        }
    }
}
