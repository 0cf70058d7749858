import GatewayCore
import HTTPServing

/// A component whose statistics `/metrics` exposes, with the labels it gets.
public struct MonitoredComponent: Sendable {
    public var stats: ComponentStats
    public var kind: ComponentKind
    /// The plugin type (`serial`, `http`): the `type` label.
    public var type: String

    public init(stats: ComponentStats, kind: ComponentKind, type: String) {
        self.stats = stats
        self.kind = kind
        self.type = type
    }
}

/// Renders statistics as Prometheus text exposition format 0.0.4.
///
/// Every family is written once, with its HELP and TYPE lines, and all its samples together
/// (the format requires it). Counters end in `_total`; a component's named values
/// (`nmea.bad_checksum`, `queue.depth`) become `locgate_nmea_bad_checksum_total` and
/// `locgate_queue_depth`, labelled with the component and its plugin type.
public enum PrometheusExposition {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private struct Family {
        var name: String
        var help: String
        var type: String
        var samples: [(labels: String, value: String)] = []
    }

    /// The whole `/metrics` page; `server`: the API's own HTTP server, when serving.
    public static func render(components: [MonitoredComponent], devices: [(device: String, latest: PipelineActivity.Latest)],
                              now: Timestamp, version: String, startedAt: Timestamp, server: HTTPServer.Statistics? = nil) -> String {
        var families: [Family] = [
            Family(name: "locgate_build_info", help: "Always 1; the version label says which locgate runs.", type: "gauge",
                   samples: [("{version=\"\(escape(version))\"}", "1")]),
            Family(name: "locgate_start_time_seconds", help: "When the pipeline started, in seconds since the Unix epoch.", type: "gauge",
                   samples: [("", seconds(startedAt.milliseconds))]),
        ]
        var received = Family(name: "locgate_component_received_positions_total",
                              help: "Positions a transform or sink received from its inputs.", type: "counter")
        var emitted = Family(name: "locgate_component_emitted_positions_total",
                             help: "Positions a source produced, a transform passed on, or a sink delivered.", type: "counter")
        var dropped = Family(name: "locgate_component_dropped_positions_total",
                             help: "Positions a component dropped (buffer overflow, queue caps); the named counters say why.", type: "counter")
        var named: [Family] = []
        var namedIndex: [String: Int] = [:]
        for c in components {
            let labels = "{component=\"\(escape(c.stats.id))\",type=\"\(escape(c.type))\"}"
            if c.kind != .source { received.samples.append((labels, String(c.stats.received))) }
            emitted.samples.append((labels, String(c.stats.emitted)))
            dropped.samples.append((labels, String(c.stats.dropped)))
            for v in c.stats.namedValuesWithKind {
                let name = metricName(v.name, kind: v.kind)
                if namedIndex[name] == nil {
                    namedIndex[name] = named.count
                    let what = v.kind == .counter ? "counter" : "gauge"
                    named.append(Family(name: name, help: "The components' \(what) \(v.name) (see the plugin's README).", type: what))
                }
                if let i = namedIndex[name] { named[i].samples.append((labels, String(v.value))) }
            }
        }
        families += [received, emitted, dropped] + named
        var ages = Family(name: "locgate_device_last_fix_age_seconds",
                          help: "Seconds since the gateway received the device's newest position from a source.", type: "gauge")
        for d in devices {
            ages.samples.append(("{device=\"\(escape(d.device))\"}", seconds(max(0, now.milliseconds - d.latest.receivedAt.milliseconds))))
        }
        families.append(ages)
        if let server {
            families.append(Family(name: "locgate_api_connections_open", help: "Connections the operator API holds open now.", type: "gauge",
                                   samples: [("", String(server.open))]))
            families.append(Family(name: "locgate_api_connections_refused_total",
                                   help: "Connections the operator API refused at accept (limit, per_address) or cut off (deadline: request not complete in time; too_large: body over the limit).",
                                   type: "counter",
                                   samples: [("{reason=\"limit\"}", String(server.refusedLimit)),
                                             ("{reason=\"per_address\"}", String(server.refusedPerAddress)),
                                             ("{reason=\"deadline\"}", String(server.deadlineClosed)),
                                             ("{reason=\"too_large\"}", String(server.tooLarge))]))
        }

        var out = ""
        out.reserveCapacity(4096)
        for f in families where !f.samples.isEmpty {
            out += "# HELP \(f.name) \(f.help)\n# TYPE \(f.name) \(f.type)\n"
            for s in f.samples { out += "\(f.name)\(s.labels) \(s.value)\n" }
        }
        return out
    }

    /// `nmea.bad_checksum` (counter) → `locgate_nmea_bad_checksum_total`; `queue.oldest_age_s`
    /// (gauge) → `locgate_queue_oldest_age_seconds`.
    public static func metricName(_ statistic: String, kind: ComponentStats.Kind) -> String {
        var base = String(statistic.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
        if base.hasSuffix("_s") { base += "econds" }
        return "locgate_" + base + (kind == .counter ? "_total" : "")
    }

    /// A label value with `\`, `"` and newlines escaped.
    static func escape(_ s: String) -> String {
        guard s.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return s }
        var out = ""
        for ch in s {
            switch ch {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(ch)
            }
        }
        return out
    }

    /// Milliseconds as seconds with three decimals.
    static func seconds(_ ms: Int64) -> String {
        let sign = ms < 0 ? "-" : ""
        let m = ms.magnitude
        let frac = String(m % 1000)
        return "\(sign)\(m / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }
}
