import GatewayCore
import DeviceCommands
import SQLiteState

/// Turns configured components into running ones: everything `Pipeline.init` starts with, and
/// what a reload adds or replaces.
///
/// Building is where a configuration meets the machine (a port bound, a file opened, a queue's
/// rows read), so it can fail where validation could not see; every failure names the
/// component's JSON path (``PipelineError``). Each component gets its own logger (labelled with
/// that path) and counters; a rebuilt one may keep its predecessor's counters.
struct PipelineBuilder: Sendable {
    let logHandler: any LogHandler
    let clock: any GatewayClock
    /// Hears what transforms emit (the operator API's live map).
    let observer: (any PipelineObserver)?

    /// Every component of a new pipeline, and its state store.
    struct Built {
        var topology: Pipeline.Topology
        /// The sinks, handed to their tasks when the pipeline runs.
        var sinks: [String: any PositionSink]
        var stateStore: (any DeviceStateStore)?
        /// Commands to devices, when a source carries them or a sink submits them.
        var commands: CommandBoard?
    }

    /// Builds sinks first, then transforms, then sources; throws the first component that
    /// cannot be built. The state store opens between transforms and sources: only a transform
    /// or a source that keeps state needs one, and each restores its devices from it.
    func build(_ configuration: PipelineConfiguration) throws -> Built {
        var t = Pipeline.Topology(configuration: configuration)
        var sinks: [String: any PositionSink] = [:]
        let board = try PipelineBuilder.openCommands(configuration, clock: clock, logger: Logger(label: "commands", handler: logHandler))
        var store: (any DeviceStateStore)?
        var built = false
        // A component that cannot be built leaves nothing open behind it.
        defer {
            if !built {
                store?.close()
                board?.close()
            }
        }
        for c in configuration.sinks {
            let ctx = context(c, commands: board)
            sinks[c.id] = try sink(c, ctx)
            t.sinks[c.id] = Pipeline.SinkHandle(component: c, context: ctx)
        }
        var transforms: [(PipelineConfiguration.Component, ComponentContext, any PositionTransform)] = []
        for c in configuration.transforms {
            let ctx = context(c)
            transforms.append((c, ctx, try transform(c, ctx)))
        }
        let needed = transforms.contains { ($0.2 as? any StatefulTransform)?.keepsState == true }
            || configuration.sources.contains { $0.prepared.keepsState }
        store = try PipelineBuilder.openStateStore(configuration, needed: needed, clock: clock, logger: Logger(label: "state", handler: logHandler))
        for (c, ctx, built) in transforms {
            t.transforms[c.id] = node(c, ctx, transform: built, store: store)
        }
        for c in configuration.sources {
            t.sources[c.id] = try source(c, context(c, store: store, commands: board))
        }
        built = true
        return Built(topology: t, sinks: sinks, stateStore: store, commands: board)
    }

    /// A component's logger and counters; `reusing` keeps a replaced instance's counters. A
    /// source that keeps state gets `store`. The command board goes to the components that carry
    /// or submit commands, and to every source when there is one: a command to a device of a
    /// source that carries none (a UDP tracker, an OsmAnd phone) is then refused with why.
    func context(_ c: PipelineConfiguration.Component, reusing stats: ComponentStats? = nil,
                 store: (any DeviceStateStore)? = nil, commands: (any CommandCenter)? = nil) -> ComponentContext {
        ComponentContext(id: c.id, kind: c.kind, logger: Logger(label: c.path, handler: logHandler),
                         stats: stats ?? ComponentStats(id: c.path), clock: clock, stateStore: c.prepared.keepsState ? store : nil,
                         commands: c.prepared.usesCommands || c.kind == .source ? commands : nil)
    }

    func source(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> Pipeline.SourceHandle {
        guard case .source(let s) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
        return Pipeline.SourceHandle(component: c, source: s, stats: ctx.stats, logger: ctx.logger)
    }

    func transform(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> any PositionTransform {
        guard case .transform(let t) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
        return t
    }

    /// A built transform as a node of the routes, its per-device state restored from `store`
    /// (for a replaced transform: the state its predecessor saved so far).
    func node(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext, transform built: any PositionTransform,
              store: (any DeviceStateStore)?) -> Pipeline.TransformNode {
        var transform = built
        let keeper = TransformStateKeeper.restore(&transform, id: c.id, store: store, context: ctx)
        return Pipeline.TransformNode(id: c.id, transform: transform, stats: ctx.stats, observer: observer, keeper: keeper)
    }

    func sink(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> any PositionSink {
        guard case .sink(let s) = try build(c, ctx) else { throw PipelineError(component: c.path, message: "plugin built the wrong kind of component") }
        return s
    }

    private func build(_ c: PipelineConfiguration.Component, _ ctx: ComponentContext) throws -> BuiltComponent {
        do { return try c.prepared.build(ctx) } catch {
            throw PipelineError(component: c.path, message: "cannot start: \(error)")
        }
    }

    /// Opens the state store when a transform keeps state and the configuration gives it a place:
    /// a backend registered beside the plugins (`state.nats`), opened through its factory so this
    /// module needs no client library of its own (``DeviceStateBackend``), or an SQLite file.
    static func openStateStore(_ configuration: PipelineConfiguration, needed: Bool, clock: any GatewayClock,
                               logger: Logger) throws -> (any DeviceStateStore)? {
        let settings = configuration.settings.state
        if needed, !settings.disabled, let backend = settings.backend {
            do {
                return try backend.open(settings, StateStoreContext(logger: logger, clock: clock))
            } catch {
                throw PipelineError(component: "settings.state.\(backend.key)", message: "cannot open the state store (\(backend.location)): \(error)")
            }
        }
        guard needed, let path = configuration.stateStorePath else { return nil }
        do {
            return try SQLiteStateStore(path: path, interval: settings.interval, maxAge: settings.maxAge, clock: clock) { logger.warning($0) }
        } catch {
            throw PipelineError(component: "settings.state", message: "cannot open the state store: \(error.path): \(error.message)")
        }
    }
}

extension PipelineBuilder {
    /// The command board, when a source carries commands or a sink submits them and
    /// `settings.commands` is not null: its SQLite file (``PipelineConfiguration/commandStorePath``),
    /// or memory when there is no place for one.
    static func openCommands(_ configuration: PipelineConfiguration, clock: any GatewayClock, logger: Logger) throws -> CommandBoard? {
        let settings = configuration.settings.commands
        guard !settings.disabled, configuration.components.contains(where: { $0.prepared.usesCommands }) else { return nil }
        let store: any CommandStore
        if settings.path == nil, let backend = configuration.settings.state.backend, !configuration.settings.state.disabled,
           let shared = try openShared(backend, clock: clock, logger: logger) {
            store = shared
        } else if let path = configuration.commandStorePath {
            do { store = try SQLiteCommandStore(path: path, clock: clock) } catch {
                throw PipelineError(component: "settings.commands", message: "cannot open the command store: \(error.path): \(error.message)")
            }
        } else {
            logger.warning("commands are kept in memory only: a restart forgets them (set settings.commands.path or settings.state.path, or give a sink a durable queue)")
            store = MemoryCommandStore()
        }
        do {
            return try CommandBoard(store: store, settings: .init(ttl: settings.ttl, attempts: settings.attempts, retain: settings.retain,
                                                                                  answerTimeout: settings.answerTimeout),
                                    clock: clock, logger: logger)
        } catch {
            store.close()
            throw PipelineError(component: "settings.commands", message: "cannot read the commands in \(store.location): \(error)")
        }
    }
}

extension PipelineBuilder {
    /// The state backend's command store (`state.nats`: the fleet's bucket), if it keeps one.
    static func openShared(_ backend: PreparedStateBackend, clock: any GatewayClock, logger: Logger) throws -> (any CommandStore)? {
        do {
            return try backend.openCommands(StateStoreContext(logger: logger, clock: clock))
        } catch {
            throw PipelineError(component: "settings.state.\(backend.key)", message: "cannot open the command store (\(backend.location)): \(error)")
        }
    }
}

/// A component that could not be built or started.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    public var component: String
    public var message: String
    public var description: String { "\(component): \(message)" }
}
