/// A validated pipeline: named sources, transforms and sinks wired by `inputs`.
///
/// ```json
/// { "settings": { "shutdown_timeout": "10s", "stats_interval": "60s" },
///   "sources":    { "rx":   { "type": "file", "path": "drive.nmea" } },
///   "transforms": { "moved": { "type": "distance_filter", "inputs": ["rx"], "min_distance_m": 10 } },
///   "sinks":      { "out":  { "type": "file", "inputs": ["moved"], "path": "out.jsonl" } } }
/// ```
public struct PipelineConfiguration: Sendable {
    /// One configured component.
    public struct Component: Sendable {
        public var id: String
        public var kind: ComponentKind
        public var type: String
        public var inputs: [String]
        public var description: String?
        /// Sinks only: the buffer in front of the sink.
        public var buffer: BufferSettings
        /// Sources only: how long each device's positions are held to be released in fix-time order.
        public var reorderWindow: Duration?
        public var prepared: PreparedComponent
        /// The component's JSON as written, without `description` and with object keys sorted:
        /// a live reload restarts the component when this (or its type, inputs or buffer) differs.
        /// `null` for components built in code, which then compare by type, inputs and buffer only.
        public var fingerprint: JSONValue
        public init(id: String, kind: ComponentKind, type: String, inputs: [String] = [], description: String? = nil,
                    buffer: BufferSettings = BufferSettings(), prepared: PreparedComponent, fingerprint: JSONValue = .null) {
            self.id = id
            self.kind = kind
            self.type = type
            self.inputs = inputs
            self.description = description
            self.buffer = buffer
            self.prepared = prepared
            self.fingerprint = fingerprint
        }

        /// Whether a reload must restart the component to go from `self` to `other`.
        public func differs(from other: Component) -> Bool {
            kind != other.kind || type != other.type || inputs != other.inputs || buffer != other.buffer || fingerprint != other.fingerprint
        }

        /// JSON path of the component, e.g. `sinks.upload`.
        public var path: String { "\(kind.section).\(id)" }
    }

    /// The bounded buffer in front of a sink.
    public struct BufferSettings: Sendable, Hashable {
        /// What happens when the buffer is full.
        public enum WhenFull: String, Sendable, Hashable, CaseIterable {
            /// The upstream waits (backpressure): nothing is lost; a slow sink slows its sources.
            case block
            /// The oldest buffered positions are dropped and counted: the latest fix wins (live displays).
            case dropOldest = "drop_oldest"
        }
        public var maxPositions: Int = 1_000
        public var whenFull: WhenFull = .block

        public init(maxPositions: Int = 1_000, whenFull: WhenFull = .block) {
            self.maxPositions = maxPositions
            self.whenFull = whenFull
        }
    }

    /// Process-wide settings.
    public struct Settings: Sendable {
        /// How long sinks get to flush after shutdown begins.
        public var shutdownTimeout = Settings.shutdownTimeoutOption.defaultValue
        /// How often the stats line is logged (nil: never).
        public var statsInterval = Settings.statsIntervalOption.defaultValue
        /// Log level from the file; `--log-level` wins over it.
        public var logLevel: LogLevel?
        /// Threads that run the pipeline's components (see `PipelineThreads`).
        public var threads = Settings.threadsOption.defaultValue
        /// The most `threads` accepts.
        public static let maximumThreads = 64
        /// Where stateful transforms keep per-device state (`settings.state`).
        public var state = StateSettings()
        /// Commands to devices (`settings.commands`).
        public var commands = CommandSettings()

        public static let shutdownTimeoutOption = Option("shutdown_timeout", default: Duration.seconds(10),
            "How long sinks get to flush after shutdown begins; then they are cancelled.")
        public static let statsIntervalOption = Option<Duration?>("stats_interval", default: .seconds(60), typeName: "duration | false",
            "How often each component logs its counters; false turns the stats line off.",
            jsonText: { $0.map(OptionText.duration) ?? "false" }) { key, reader in
            if reader.value(key) == .bool(false) { return .some(nil) }
            return reader.optionalDuration(key, minimum: .milliseconds(100)).map { .some($0) }
        }
        public static let threadsOption = Option("threads", default: 1, in: 1...maximumThreads, typeName: "integer, 1-\(maximumThreads)",
            "Threads that run the components (sources, the transforms they feed, sinks).")

        /// The options of `settings`, for the configuration reference (Docs/Configuration.md), with
        /// the state store's and those of the state backends in `registry`.
        public static func options(registry: PluginRegistry = PluginRegistry()) -> [OptionSpec] {
            [shutdownTimeoutOption.spec, statsIntervalOption.spec,
             OptionSpec("log_level", "string", default: "\"info\"", "trace, debug, info, warning, error; --log-level wins over it."),
             threadsOption.spec]
                + StateSettings.options
                + CommandSettings.options
                + registry.stateBackends.flatMap { backend in
                    backend.options.map { o in
                        var spec = o
                        spec.name = "state.\(backend.key).\(o.name)"
                        return spec
                    }
                }
        }

        public init(shutdownTimeout: Duration = Settings.shutdownTimeoutOption.defaultValue,
                    statsInterval: Duration? = Settings.statsIntervalOption.defaultValue, logLevel: LogLevel? = nil,
                    threads: Int = Settings.threadsOption.defaultValue) {
            self.shutdownTimeout = shutdownTimeout
            self.statsInterval = statsInterval
            self.logLevel = logLevel
            self.threads = threads
        }
    }

    public var sources: [Component] = []
    public var transforms: [Component] = []
    public var sinks: [Component] = []
    public var settings = Settings()
    /// The operator HTTP API; nil (the default) when the file has no `"api"` key.
    public var api: API?

    public init(sources: [Component] = [], transforms: [Component] = [], sinks: [Component] = [], settings: Settings = Settings(), api: API? = nil) {
        self.sources = sources
        self.transforms = transforms
        self.sinks = sinks
        self.settings = settings
        self.api = api
    }

    /// Every component, sources first.
    public var components: [Component] { sources + transforms + sinks }

    public func component(_ id: String) -> Component? { components.first { $0.id == id } }

    /// The common keys every component may have besides its plugin's options.
    public static let commonKeys = ["type", "inputs", "description", "buffer", "reorder_window"]

    /// Loads and validates a configuration, reporting every problem at once.
    public static func load(
        json bytes: some Collection<UInt8>, registry: PluginRegistry,
        environment: [String: String] = [:], baseDirectory: String = "."
    ) throws(ConfigurationError) -> PipelineConfiguration {
        let root: JSONValue
        do { root = try JSONValue.parse(bytes, duplicateKeys: .reject) } catch {
            throw ConfigurationError(problems: [ConfigurationProblem(path: "$", message: "not valid JSON: \(error)")])
        }
        let diagnostics = ConfigurationDiagnostics()
        let config = read(root, registry: registry, environment: environment, baseDirectory: baseDirectory, diagnostics: diagnostics)
        if !diagnostics.isEmpty { throw ConfigurationError(problems: diagnostics.problems) }
        return config
    }

    private static func read(
        _ root: JSONValue, registry: PluginRegistry, environment: [String: String], baseDirectory: String,
        diagnostics: ConfigurationDiagnostics
    ) -> PipelineConfiguration {
        var config = PipelineConfiguration()
        guard case .object(let top) = root else {
            diagnostics.report("$", "expected an object with \"sources\", \"transforms\" and \"sinks\", got \(root.kindName)")
            return config
        }
        var reader = OptionReader(object: top, path: "", diagnostics: diagnostics, environment: environment, baseDirectory: baseDirectory)
        if var s = reader.object("settings") {
            config.settings.shutdownTimeout = s.read(Settings.shutdownTimeoutOption)
            config.settings.statsInterval = s.read(Settings.statsIntervalOption)
            config.settings.threads = s.read(Settings.threadsOption)
            config.settings.state = StateSettings.read(&s, registry: registry)
            config.settings.commands = CommandSettings.read(&s)
            if let l = s.string("log_level") {
                if let level = LogLevel(name: l) { config.settings.logLevel = level } else {
                    s.report("log_level", "expected one of trace, debug, info, warning, error, got \"\(l)\"")
                }
            }
            s.finish()
        }
        if var a = reader.object("api") {
            config.api = API.read(&a)
            a.finish()
        }
        var seen: [String: String] = [:]
        for kind in ComponentKind.allCases {
            guard let section = reader.value(kind.section) else { continue }
            guard case .object(let members) = section else {
                diagnostics.report(kind.section, "expected an object of named \(kind.section), got \(section.kindName)")
                continue
            }
            for m in members {
                let path = "\(kind.section).\(m.key)"
                if let other = seen[m.key] {
                    diagnostics.report(path, "component id \"\(m.key)\" is already used by \(other)")
                    continue
                }
                seen[m.key] = path
                if m.key.isEmpty || m.key.contains(where: { $0 == "." || $0.isWhitespace }) {
                    diagnostics.report(path, "component ids must be non-empty, without dots or spaces")
                }
                if let c = readComponent(m.key, kind: kind, value: m.value, registry: registry, environment: environment,
                                         baseDirectory: baseDirectory, diagnostics: diagnostics) {
                    switch kind {
                    case .source: config.sources.append(c)
                    case .transform: config.transforms.append(c)
                    case .sink: config.sinks.append(c)
                    }
                }
            }
        }
        reader.finish()
        // Missing or empty (a section of the wrong kind or whose members failed is already reported).
        for (kind, what) in [(ComponentKind.source, "source"), (.sink, "sink")] {
            let section = top[kind.section]
            let declared = seen.values.contains { $0.hasPrefix(kind.section + ".") }
            if !declared && (section == nil || section?.objectValue != nil) {
                diagnostics.report(kind.section, "a pipeline needs at least one \(what)")
            }
        }
        checkGraph(config, declared: Set(seen.keys), diagnostics: diagnostics)
        return config
    }

    private static func readComponent(
        _ id: String, kind: ComponentKind, value: JSONValue, registry: PluginRegistry, environment: [String: String],
        baseDirectory: String, diagnostics: ConfigurationDiagnostics
    ) -> Component? {
        let path = "\(kind.section).\(id)"
        guard case .object(let object) = value else {
            diagnostics.report(path, "expected an object, got \(value.kindName)")
            return nil
        }
        var reader = OptionReader(object: object, path: path, diagnostics: diagnostics, environment: environment, baseDirectory: baseDirectory)
        reader.markKnown(commonKeys)
        let description = reader.string("description")
        var inputs: [String] = []
        if kind == .source {
            if reader.has("inputs") { reader.report("inputs", "a source has no inputs") }
        } else {
            inputs = reader.stringArray("inputs") ?? []
            if object["inputs"] == nil { reader.report("inputs", "required option is missing: name the components this \(kind.rawValue) reads from") }
            else if inputs.isEmpty && object["inputs"]?.arrayValue != nil { reader.report("inputs", "must name at least one component") }
        }
        var buffer = BufferSettings()
        if var b = reader.object("buffer") {
            if kind != .sink { b.report("", "only sinks have a buffer") }
            buffer.maxPositions = b.int("max_positions", default: buffer.maxPositions, in: 1...10_000_000)
            let policy = b.choice("when_full", BufferSettings.WhenFull.allCases.map(\.rawValue), default: buffer.whenFull.rawValue)
            buffer.whenFull = BufferSettings.WhenFull(rawValue: policy) ?? .block
            b.finish()
        }
        var reorderWindow: Duration?
        if reader.has("reorder_window") {
            if kind != .source { reader.report("reorder_window", "only sources have a reorder_window") }
            let window = reader.duration("reorder_window", default: .zero)
            if window > .seconds(3600) { reader.report("reorder_window", "at most 1h: positions are held in memory (and their devices unanswered) that long") }
            reorderWindow = window > .zero ? window : nil
        }
        guard let type = reader.requiredString("type") else { return nil }
        guard let plugin = registry.plugin(kind: kind, type: type) else {
            let known = registry.plugins(of: kind).map(\.info.type)
            let guess = Suggestion.closest(to: type, among: known).map { " did you mean \"\($0)\"?" } ?? ""
            reader.report("type", "unknown \(kind.rawValue) type \"\(type)\";\(guess) known: \(known.joined(separator: ", "))")
            return nil
        }
        reader.nestedOptions = plugin.info.options.map(\.name).filter { $0.contains(".") }
        let prepared = plugin.prepare(&reader)
        reader.finish()
        var written = object
        written["description"] = nil
        var component = Component(id: id, kind: kind, type: type, inputs: inputs, description: description, buffer: buffer, prepared: prepared,
                                  fingerprint: JSONValue.object(written).sortingKeys)
        component.reorderWindow = reorderWindow
        return component
    }

    /// Inputs that name nothing or a sink, cycles among transforms, and two components claiming one resource.
    private static func checkGraph(_ config: PipelineConfiguration, declared: Set<String>, diagnostics: ConfigurationDiagnostics) {
        let byID = Dictionary(config.components.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for c in config.transforms + config.sinks {
            for (i, input) in c.inputs.enumerated() {
                guard let target = byID[input] else {
                    // A component that exists but failed to load already has its own problem.
                    if declared.contains(input) { continue }
                    diagnostics.report("\(c.path).inputs[\(i)]", "\"\(input)\" names no source or transform")
                    continue
                }
                if target.kind == .sink { diagnostics.report("\(c.path).inputs[\(i)]", "\"\(input)\" is a sink; sinks have no output") }
                if input == c.id { diagnostics.report("\(c.path).inputs[\(i)]", "a component cannot read its own output") }
            }
            if Set(c.inputs).count != c.inputs.count { diagnostics.report("\(c.path).inputs", "names a component twice") }
        }
        // Cycle detection over transforms (sources have no inputs, sinks no outputs).
        var state: [String: Int] = [:]  // 1 visiting, 2 done
        var reported = Set<String>()
        func visit(_ id: String, trail: [String]) {
            guard let c = byID[id], c.kind == .transform else { return }
            if state[id] == 2 { return }
            if state[id] == 1 {
                let cycle = trail.drop(while: { $0 != id }) + [id]
                if reported.insert(Set(cycle).sorted().joined(separator: ",")).inserted {
                    diagnostics.report("\(c.path).inputs", "cycle: \(cycle.joined(separator: " -> "))")
                }
                return
            }
            state[id] = 1
            for input in c.inputs where input != id { visit(input, trail: trail + [id]) }
            state[id] = 2
        }
        for t in config.transforms { visit(t.id, trail: []) }
        var claimedBy: [String: String] = [:]
        for c in config.components {
            for claim in c.prepared.claims {
                if let other = claimedBy[claim] {
                    diagnostics.report(c.path, "\(claim) is already claimed by \(other)")
                } else {
                    claimedBy[claim] = c.path
                }
            }
        }
    }
}
