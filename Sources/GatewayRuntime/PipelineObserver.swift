import GatewayCore

/// Sees what each source produces and how it ends: the operator API's view of the pipeline
/// (newest position per device, sources that stopped producing).
///
/// Implementation requirements: the calls come from the sources' tasks, on the path every
/// position takes, so each must be short and must not wait.
public protocol PipelineObserver: Sendable {
    /// `source` (a component id) emitted `batch`, before it goes to transforms and sinks.
    func sourceEmitted(_ source: String, _ batch: [Position])
    /// `source`'s input ended (`failed` false) or it failed; not called when shutdown stopped it.
    func sourceEnded(_ source: String, failed: Bool)
    /// `transform` (a component id) passed on or made `batch` (geofence events are born here);
    /// called only for a non-empty output, before it goes on.
    func transformEmitted(_ transform: String, _ batch: [Position])
}

extension PipelineObserver {
    /// Observers that only watch sources need not implement it.
    public func transformEmitted(_ transform: String, _ batch: [Position]) {}
}
