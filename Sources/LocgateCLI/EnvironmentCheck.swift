import Foundation
import GatewayCore
import Locking
import SQLiteState

/// Runs every component's environment check for `locgate validate`.
enum EnvironmentCheck {
    /// Findings of every component, in configuration order. Components are checked at once, each
    /// on a thread of its own: peer probes block for up to their timeout, and ten unreachable
    /// peers must not add up to ten timeouts.
    static func run(_ config: PipelineConfiguration, peerTimeout: Duration = .seconds(2)) -> [EnvironmentFinding] {
        let components = config.components
        let results = Locked([[EnvironmentFinding]](repeating: [], count: components.count))
        let group = DispatchGroup()
        for (i, c) in components.enumerated() {
            group.enter()
            let check = c.prepared.checkEnvironment
            let context = EnvironmentContext(path: c.path, peerTimeout: peerTimeout)
            Thread.detachNewThread {
                let found = check(context)
                results.withLock { $0[i] = found }
                group.leave()
            }
        }
        group.wait()
        return stateStore(config) + results.withLock { $0.flatMap { $0 } }
    }

    /// The state store's directory (settings.state), where a start would create it.
    static func stateStore(_ config: PipelineConfiguration) -> [EnvironmentFinding] {
        guard let path = config.stateStorePath else { return [] }
        let key = config.settings.state.path == nil ? "settings.state" : "settings.state.path"
        if let problem = SQLiteStateStore.problem(path: path) { return [EnvironmentFinding(.error, path: key, message: "\(path): \(problem)")] }
        return [EnvironmentFinding(.info, path: key, message: "per-device state (stateful transforms, jt808 registrations) is kept in \(path)")]
    }
}
