import GatewayCore

/// What `/health` answers: healthy, or every unhealthy component and why.
///
/// - A source is unhealthy when it produced nothing for `source_stall` (counted from the start
///   until its first position), or when it failed. One whose input ended (a finite replay) is fine.
/// - A sink with a delivery queue (http, mqtt, nats) is unhealthy when its oldest queued
///   position is older than `max_queue_age`: the peer has not taken positions for that long.
public struct HealthReport: Sendable {
    public struct Problem: Sendable, Equatable {
        /// The component's path, `sources.gps`.
        public var component: String
        public var reason: String
    }

    public var problems: [Problem]
    public var isHealthy: Bool { problems.isEmpty }

    public init(sources: [String], sinks: [ComponentStats], monitor: PipelineActivity, settings: PipelineConfiguration.API, now: Timestamp) {
        var problems: [Problem] = []
        let stall = settings.sourceStall.milliseconds
        for id in sources {
            let s = monitor.source(id)
            let path = "\(ComponentKind.source.section).\(id)"
            if s.failed {
                problems.append(Problem(component: path, reason: "failed"))
            } else if !s.ended {
                let quiet = now.milliseconds - (s.lastEmitted ?? monitor.startedAt).milliseconds
                if quiet > stall {
                    let since = s.lastEmitted == nil ? "since the start" : "for"
                    problems.append(Problem(component: path, reason: "no position \(since) \(quiet / 1000) s (health.source_stall is \(DurationText.format(settings.sourceStall)))"))
                }
            }
        }
        let limit = settings.maxQueueAge.milliseconds / 1000
        for stats in sinks where stats.value("queue.depth") > 0 {
            let age = stats.value("queue.oldest_age_s")
            if age > limit {
                problems.append(Problem(component: stats.id, reason: "oldest queued position is \(age) s old, \(stats.value("queue.depth")) queued (health.max_queue_age is \(DurationText.format(settings.maxQueueAge)))"))
            }
        }
        self.problems = problems
    }

    /// `{"status":"ok"}`, or `{"status":"unhealthy","problems":[{"component":…,"reason":…}]}`.
    public var json: [UInt8] {
        var out: [UInt8] = []
        out += Array(#"{"status":"#.utf8)
        JSONWriter.appendString(isHealthy ? "ok" : "unhealthy", to: &out)
        if !isHealthy {
            out += Array(#","problems":["#.utf8)
            for (i, p) in problems.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out += Array(#"{"component":"#.utf8)
                JSONWriter.appendString(p.component, to: &out)
                out += Array(#","reason":"#.utf8)
                JSONWriter.appendString(p.reason, to: &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
        }
        out += Array("}\n".utf8)
        return out
    }
}
