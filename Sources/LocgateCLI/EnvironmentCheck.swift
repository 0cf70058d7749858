import Foundation
import GatewayCore
import Synchronization

/// Runs every component's environment check for `locgate validate`.
enum EnvironmentCheck {
    /// Findings of every component, in configuration order. Components are checked at once, each
    /// on a thread of its own: peer probes block for up to their timeout, and ten unreachable
    /// peers must not add up to ten timeouts.
    static func run(_ config: PipelineConfiguration, peerTimeout: Duration = .seconds(2)) -> [EnvironmentFinding] {
        let components = config.components
        let results = Mutex([[EnvironmentFinding]](repeating: [], count: components.count))
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
        return results.withLock { $0.flatMap { $0 } }
    }
}
