import GatewayCore
import NATSClient
import SystemIO
import EnvironmentChecks

/// Configuration of the `nats` source (see the README for every option with its default).
public struct NATSSourceConfiguration: Sendable {
    /// The message body.
    public enum Format: String, Sendable, CaseIterable { case json }

    public var connection = NATSConnectionOptions()
    /// True: a durable JetStream pull consumer, each message acknowledged once the pipeline took
    /// it over. False: a core NATS subscription to `subject` (lossy: nothing is acknowledged).
    public var jetstream = NATSSourcePlugin.jetstream.defaultValue
    public var stream = ""
    public var consumer = ""
    public var filterSubject: String?
    public var deliver: NATSDeliverPolicy = .all
    public var maxAckPending = NATSSourcePlugin.maxAckPending.defaultValue
    public var ackWait = NATSSourcePlugin.ackWait.defaultValue
    /// Core NATS: the subject (wildcards allowed) subscribed to.
    public var subject = ""
    /// Most messages asked for in one fetch (JetStream) or taken in one batch (core).
    public var batch = NATSSourcePlugin.batch.defaultValue
    /// Most positions emitted and not yet acknowledged by the pipeline.
    public var maxUnacked = NATSSourcePlugin.maxUnacked.defaultValue
    public var format = NATSSourcePlugin.format.defaultValue

    public init() {}
}

/// The `nats` source: positions from a JetStream durable pull consumer (or a core subscription).
public enum NATSSourcePlugin: SourcePlugin {
    public static let jetstream = Option("jetstream", default: true,
        "true: a durable JetStream pull consumer, each message acknowledged only once the pipeline took it over (at-least-once). false: a core NATS subscription to subject (lossy: what arrives while locgate is down or slow is lost).")
    public static let deliver = Option("deliver", choices: ["all", "new", "by_start_time"], default: "all",
        "Where a new consumer starts: the first message of the stream, messages stored after it was created, or those stored at or after start_time.")
    public static let maxAckPending = Option("max_ack_pending", default: 2000, in: 1...1_000_000,
        "Most messages the server delivers to the consumer unacknowledged; keep it above max_unacked.")
    public static let ackWait = Option("ack_wait", default: Duration.seconds(30), minimum: .seconds(1),
        "How long the server waits for an acknowledgement before delivering a message again; longer than the pipeline needs to take max_unacked positions over.")
    public static let batch = Option("batch", default: 100, in: 1...10_000,
        "Most messages asked for in one fetch (1 to 10000).")
    public static let maxUnacked = Option("max_unacked", default: 1000, in: 1...1_000_000,
        "Most positions emitted and not yet taken over by every sink; fetching waits while they are outstanding.")
    public static let format = Option("format", default: NATSSourceConfiguration.Format.json,
        "Message body: one position in locgate JSON (gpsd TPV names), as the nats sink writes it. Without a device, the device is the subject's last token.")

    public static let info = PluginInfo(
        type: "nats", kind: .source,
        summary: "Reads positions from a NATS JetStream durable pull consumer and acknowledges each message only once every sink took it over; or from a core NATS subject (lossy).",
        folder: "NATSInput",
        options: NATSConnectionOptions.specs + [
            jetstream.spec,
            OptionSpec("stream", "string", default: "required with jetstream", "Stream to consume; it must exist (the nats sink can create it). Waited for, with backoff, while it does not."),
            OptionSpec("consumer", "string", default: "required with jetstream", "Durable consumer name; created when missing (pull, explicit acks, with filter_subject, deliver, max_ack_pending and ack_wait), used unchanged when it exists."),
            OptionSpec("filter_subject", "string", default: "none (the whole stream)", "Only messages on subjects matching this filter, e.g. locgate.part.0.> for one partition."),
            deliver.spec,
            OptionSpec("start_time", "string", default: "required with by_start_time", "ISO 8601 UTC time, e.g. \"2024-05-01T00:00:00Z\"."),
            maxAckPending.spec,
            ackWait.spec,
            OptionSpec("subject", "string", default: "required without jetstream", "Core NATS: the subject to subscribe to (wildcards allowed), e.g. locgate.positions.>."),
            batch.spec,
            maxUnacked.spec,
            format.spec,
        ],
        sample: #"{ "type": "nats", "servers": ["nats://127.0.0.1:4222"], "stream": "LOCGATE", "consumer": "aggregator-0", "filter_subject": "locgate.part.0.>" }"#
    )

    public static func configure(_ options: inout OptionReader) -> NATSSourceConfiguration {
        var c = NATSSourceConfiguration()
        c.connection = NATSConnectionOptions.read(&options)
        c.jetstream = options.read(jetstream)
        let jetstreamOnly = ["stream", "consumer", "filter_subject", "deliver", "start_time", "max_ack_pending", "ack_wait"]
        if c.jetstream {
            if let stream = options.string("stream") {
                if let problem = tokenProblem(stream, what: "a stream name") { options.report("stream", problem) }
                c.stream = stream
            } else if !options.has("stream") {
                options.report("stream", "required option is missing: the stream to consume, e.g. \"LOCGATE\"")
            }
            if let consumer = options.string("consumer") {
                if let problem = tokenProblem(consumer, what: "a consumer name") { options.report("consumer", problem) }
                c.consumer = consumer
            } else if !options.has("consumer") {
                options.report("consumer", "required option is missing: the durable consumer's name, e.g. \"aggregator-0\"")
            }
            if let filter = options.string("filter_subject") {
                if let problem = NATSSubject.problem(filter, wildcards: true) { options.report("filter_subject", problem) }
                c.filterSubject = filter
            }
            let from = options.read(deliver)
            let start = options.string("start_time")
            switch from {
            case "new": c.deliver = .new
            case "by_start_time":
                if let start {
                    if let t = Timestamp(iso8601: start) { c.deliver = .byStartTime(t) } else {
                        options.report("start_time", "expected an ISO 8601 time such as \"2024-05-01T00:00:00Z\", got \"\(start)\"")
                    }
                } else {
                    options.report("start_time", "required with \"deliver\": \"by_start_time\"")
                }
            default: c.deliver = .all
            }
            if start != nil && from != "by_start_time" { options.report("start_time", "only used with \"deliver\": \"by_start_time\"") }
            c.maxAckPending = options.read(maxAckPending)
            c.ackWait = options.read(ackWait)
            if options.has("subject") { options.report("subject", "only used with \"jetstream\": false (a JetStream consumer reads its stream; narrow it with filter_subject)") }
        } else {
            for key in jetstreamOnly where options.has(key) { options.report(key, "only used with \"jetstream\": true") }
            if let subject = options.string("subject") {
                if let problem = NATSSubject.problem(subject, wildcards: true) { options.report("subject", problem) }
                c.subject = subject
            } else if !options.has("subject") {
                options.report("subject", "required with \"jetstream\": false: the subject to subscribe to, e.g. \"locgate.positions.>\"")
            }
        }
        c.batch = options.read(batch)
        c.maxUnacked = options.read(maxUnacked)
        if c.jetstream && c.maxAckPending < min(c.batch, c.maxUnacked) {
            options.report("max_ack_pending", "must be at least batch or max_unacked (\(min(c.batch, c.maxUnacked))), or fetches come back short")
        }
        c.format = options.read(format)
        return c
    }

    /// Stream and consumer names are one token: no spaces, dots, wildcards or path separators.
    static func tokenProblem(_ name: String, what: String) -> String? {
        if name.isEmpty { return "\(what) cannot be empty" }
        if name.contains(where: { $0 == "." || $0 == "*" || $0 == ">" || $0 == "/" || $0 == "\\" || $0.isWhitespace }) {
            return "\(what) cannot contain spaces, dots, *, > or slashes: \"\(name)\""
        }
        return nil
    }

    /// Two sources of one pipeline on the same durable consumer would share its messages, and a
    /// device's positions would be split between them.
    public static func claims(of configuration: NATSSourceConfiguration) -> [String] {
        configuration.jetstream ? ["nats consumer \(configuration.stream)/\(configuration.consumer)"] : []
    }

    public static func makeSource(_ configuration: NATSSourceConfiguration, context: ComponentContext) throws -> any PositionSource {
        NATSPositionSource(configuration: configuration, context: context)
    }
}

extension NATSSourcePlugin {
    /// At least one server should accept a TCP connection: a warning only, since the client
    /// reconnects to any of them.
    public static func checkEnvironment(_ configuration: NATSSourceConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings: [EnvironmentFinding] = []
        let problems = configuration.connection.serverAddresses.compactMap { s in
            PeerCheck.tcpProblem(host: s.host, port: s.port, timeout: context.peerTimeout).map { "\(s.url): \($0)" }
        }
        if !problems.isEmpty && problems.count == configuration.connection.serverAddresses.count {
            findings.append(context.warning("servers", "no server is reachable now (\(problems.joined(separator: "; "))); the client reconnects until one is"))
        }
        return findings
    }
}
