import GatewayCore

// Routing: batches from sources through transforms to sinks, along the routes of one table.
extension Pipeline {
    /// Where a batch goes next.
    indirect enum Route: Sendable {
        case transform(TransformNode, [Route])
        case sink(SinkBuffer)
    }

    /// Transforms with every transform they read from before them, so a tick's or a finish's
    /// output meets the later transforms while they still take positions.
    static func topologicalOrder(_ transforms: [PipelineConfiguration.Component]) -> [PipelineConfiguration.Component] {
        let ids = Set(transforms.map(\.id))
        var placed = Set<String>()
        var order: [PipelineConfiguration.Component] = []
        var remaining = transforms
        while !remaining.isEmpty {
            let before = remaining.count
            remaining.removeAll { t in
                let ready = t.inputs.allSatisfy { !ids.contains($0) || placed.contains($0) }
                if ready { placed.insert(t.id); order.append(t) }
                return ready
            }
            if remaining.count == before { order += remaining; break }  // a cycle: validation rejects it
        }
        return order
    }

    /// The routes out of every source and transform, from the running transforms and sink buffers.
    static func makeTable(_ t: Topology) -> RoutingTable {
        let order = topologicalOrder(t.configuration.transforms)
        var memo: [String: [Route]] = [:]
        var visiting = Set<String>()
        func routes(from id: String) -> [Route] {
            if let m = memo[id] { return m }
            // A cycle (rejected by validation) must not recurse forever.
            guard visiting.insert(id).inserted else { return [] }
            var r: [Route] = []
            for c in order where c.inputs.contains(id) {
                if let n = t.transforms[c.id] { r.append(.transform(n, routes(from: c.id))) }
            }
            for c in t.configuration.sinks where c.inputs.contains(id) {
                if let h = t.sinks[c.id] { r.append(.sink(h.buffer)) }
            }
            visiting.remove(id)
            memo[id] = r
            return r
        }
        var sources: [String: [Route]] = [:]
        for c in t.configuration.sources { sources[c.id] = routes(from: c.id) }
        var transforms: [(TransformNode, [Route])] = []
        for c in order { if let n = t.transforms[c.id] { transforms.append((n, routes(from: c.id))) } }
        return RoutingTable(sources: sources, transforms: transforms)
    }

    /// Sends a source's batch along the routes of the current table.
    func route(_ batch: consuming [Position], fromSource id: String, acknowledgement: BatchAcknowledgement?,
               onConflict: @escaping StateConflictHandler) async {
        let table = routing.acquire()
        if let routes = table.sources[id] { await Pipeline.route(batch, to: routes, acknowledgement: acknowledgement, onConflict: onConflict) }
        table.leave()
    }

    /// What a transform's state keeper calls when a shared state store refused a write because
    /// another gateway wrote the device's state meanwhile.
    typealias StateConflictHandler = @Sendable (DeviceStateStoreError) -> Void

    /// Sends a batch along each route: transforms inline, sinks through their buffers.
    ///
    /// An acknowledgement follows the batch and whatever transforms make of it (geofence events
    /// included): each sink buffer that receives positions retains it until its sink acknowledged
    /// them; what transforms drop needs nothing more.
    ///
    /// The last route gets the batch itself, earlier ones a copy: a transform changes its batch
    /// in place, which copies the positions only while another route still holds them.
    static func route(_ batch: consuming [Position], to routes: [Route], acknowledgement: BatchAcknowledgement? = nil,
                      onConflict: StateConflictHandler? = nil) async {
        guard let last = routes.last else { return }
        for r in routes.dropLast() { await send(copy batch, along: r, acknowledgement: acknowledgement, onConflict: onConflict) }
        await send(batch, along: last, acknowledgement: acknowledgement, onConflict: onConflict)
    }

    private static func send(_ batch: consuming [Position], along route: Route, acknowledgement: BatchAcknowledgement?,
                             onConflict: StateConflictHandler?) async {
        switch route {
        case .sink(let buffer):
            await buffer.send(batch, acknowledgement: acknowledgement)
        case .transform(let node, let next):
            let (out, changes) = node.process(batch)
            // With an acknowledgement, the state is saved once the batch is handled, before the
            // acknowledgement goes upstream; without one, once routing returned (a durable sink
            // has committed by then).
            if !changes.isEmpty, let acknowledgement { node.keeper?.save(changes, when: acknowledgement, onConflict: onConflict) }
            if !out.isEmpty { await Pipeline.route(out, to: next, acknowledgement: acknowledgement, onConflict: onConflict) }
            if !changes.isEmpty && acknowledgement == nil { node.keeper?.save(changes, when: nil, onConflict: onConflict) }
        }
    }

    /// Like `route`, for shutdown: sink buffers accept without waiting (the sinks are still draining).
    static func routeSynchronously(_ batch: consuming [Position], to routes: [Route]) {
        guard let last = routes.last else { return }
        for r in routes.dropLast() { sendSynchronously(copy batch, along: r) }
        sendSynchronously(batch, along: last)
    }

    private static func sendSynchronously(_ batch: consuming [Position], along route: Route) {
        switch route {
        case .sink(let buffer): buffer.enqueueWithoutWaiting(batch)
        case .transform(let node, let next):
            let (out, changes) = node.process(batch)
            if !out.isEmpty { routeSynchronously(out, to: next) }
            if !changes.isEmpty { node.keeper?.save(changes, when: nil) }
        }
    }
}
