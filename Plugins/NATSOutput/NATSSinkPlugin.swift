import GatewayCore
import NATSClient
import DeliveryEngine
import SystemIO
import EnvironmentChecks

/// The `nats` sink: publishes positions to NATS JetStream (or core NATS) from a durable outbox.
public enum NATSSinkPlugin: SinkPlugin {
    public static let subject = Option("subject", default: SubjectTemplate.valid("locgate.positions.{device}"), typeName: "string",
        "Subject template; {device} (device id, else source id), {source}, {event} (enter, exit, dwell, or position) are each cleaned into one token (. * > and spaces become _).",
        jsonText: { OptionText.string($0.text) },
        read: { key, reader -> SubjectTemplate? in
            guard let text = reader.string(key) else { return nil }
            do throws(SubjectTemplate.TemplateError) {
                return try SubjectTemplate(text)
            } catch {
                reader.report(key, error.message)
                return nil
            }
        })
    public static let jetstream = Option("jetstream", default: true,
        "true: publish to JetStream, delete a position only on its PubAck. false: core NATS, deleted once a flush confirmed the server read it (lossy: nobody stores it).")
    public static let replicas = Option("stream.replicas", default: 1, in: 1...5,
        "Copies in the cluster (1 to 5; 3 survives the loss of one node).")
    public static let duplicateWindow = Option("stream.duplicate_window", default: Duration.seconds(120), minimum: .milliseconds(100),
        "How long the stream remembers message ids to drop re-sends; longer than a restart after a crash.")
    public static let storage = Option("stream.storage", choices: ["file", "memory"], default: "file",
        "Where the stream keeps messages.")
    public static let maxPending = Option("max_pending", default: 1000, in: 1...100_000,
        "Most messages published and not yet acknowledged (the window that gives throughput).")
    public static let ackTimeout = Option("ack_timeout", default: Duration.seconds(5), minimum: .milliseconds(10),
        "How long to wait for a PubAck (or flush) before sending the message again with the same id.")
    public static let format = Option("format", default: NATSSinkConfiguration.Format.json,
        "Message body: one position in locgate JSON (gpsd TPV names).")

    public static let info = PluginInfo(
        type: "nats", kind: .sink,
        summary: "Publishes positions to NATS JetStream with Nats-Msg-Id = position id from a durable outbox; deletes each only on its PubAck.",
        folder: "NATSOutput",
        options: NATSConnectionOptions.specs + [
            subject.spec,
            jetstream.spec,
            OptionSpec("expect_stream", "string", default: "stream.name, else none", "Stream that must capture the subject: checked at start (an error when it does not exist or does not capture the subject) and sent with every message, so the server refuses any other stream."),
            OptionSpec("stream", "object", default: "none", "Create this stream at start when it does not exist; an existing stream is never altered."),
            OptionSpec("stream.name", "string", required: true, "Stream name."),
            OptionSpec("stream.subjects", "array", default: "the subject with * for each placeholder token", "Subjects the stream captures."),
            replicas.spec,
            duplicateWindow.spec,
            storage.spec,
            maxPending.spec,
            ackTimeout.spec,
            format.spec,
        ] + OutboxOptions.specs,
        sample: #"{ "type": "nats", "inputs": ["receiver"], "servers": ["nats://127.0.0.1:4222"], "subject": "locgate.positions.{device}", "expect_stream": "LOCGATE", "queue": { "path": "nats-outbox.sqlite" } }"#
    )

    public static func configure(_ options: inout OptionReader) -> NATSSinkConfiguration {
        var c = NATSSinkConfiguration()
        c.connection = NATSConnectionOptions.read(&options)
        c.subject = options.read(subject)
        c.jetstream = options.read(jetstream)
        if let name = options.string("expect_stream") {
            if let problem = streamNameProblem(name) { options.report("expect_stream", problem) }
            c.expectStream = name
        }
        if var stream = options.object("stream") {
            let name = stream.requiredString("name") ?? ""
            if !name.isEmpty, let problem = streamNameProblem(name) { stream.report("name", problem) }
            var subjects = [c.subject.filter]
            if let list = stream.stringArray("subjects") {
                if list.isEmpty { stream.report("subjects", "must list at least one subject") }
                for (i, s) in list.enumerated() {
                    if let problem = NATSSubject.problem(s, wildcards: true) { stream.report("subjects[\(i)]", problem) }
                }
                subjects = list
            }
            let copies = stream.read(replicas)
            let window = stream.read(duplicateWindow)
            let keptIn = stream.read(storage)
            stream.finish()
            c.stream = NATSStreamConfig(name: name, subjects: subjects, replicas: copies, duplicateWindow: window, fileStorage: keptIn == "file")
            if c.expectStream == nil { c.expectStream = name }
        }
        if !c.jetstream {
            if options.has("expect_stream") { options.report("expect_stream", "only used with \"jetstream\": true") }
            if options.has("stream") { options.report("stream", "only used with \"jetstream\": true") }
        }
        c.maxPending = options.read(maxPending)
        c.ackTimeout = options.read(ackTimeout)
        c.format = options.read(format)
        c.queue = OutboxOptions.read(&options)
        return c
    }

    /// Stream names are one token: no spaces, dots, wildcards or path separators.
    static func streamNameProblem(_ name: String) -> String? {
        if name.isEmpty { return "a stream name cannot be empty" }
        if name.contains(where: { $0 == "." || $0 == "*" || $0 == ">" || $0 == "/" || $0 == "\\" || $0.isWhitespace }) {
            return "a stream name cannot contain spaces, dots, *, > or slashes: \"\(name)\""
        }
        return nil
    }

    public static func makeSink(_ configuration: NATSSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        let outbox = try OutboxOptions.open(configuration.queue, context: context)
        return NATSSink(configuration: configuration, context: context, outbox: outbox)
    }
}

extension NATSSinkPlugin {
    /// At least one server should accept a TCP connection: a warning only, since the client
    /// reconnects to any of them.
    public static func checkEnvironment(_ configuration: NATSSinkConfiguration, context: EnvironmentContext) -> [EnvironmentFinding] {
        var findings: [EnvironmentFinding] = []
        findings += OutboxOptions.checkEnvironment(configuration.queue, context: context)
        let problems = configuration.connection.serverAddresses.compactMap { s in
            PeerCheck.tcpProblem(host: s.host, port: s.port, timeout: context.peerTimeout).map { "\(s.url): \($0)" }
        }
        if !problems.isEmpty && problems.count == configuration.connection.serverAddresses.count {
            findings.append(context.warning("servers", "no server is reachable now (\(problems.joined(separator: "; "))); the client reconnects until one is"))
        }
        return findings
    }
}
