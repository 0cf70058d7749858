import GatewayCore
import NATSClient

/// `settings.state.nats`: per-device state in a NATS JetStream Key-Value bucket.
public struct NATSStateConfiguration: Sendable, Hashable {
    public static let bucketOption = Option("bucket", default: "locgate-state",
        "The Key-Value bucket; created when missing (with replicas and max_age as its TTL), used unchanged when it exists. Letters, digits, - and _.")
    public static let commandsBucketOption = Option("commands_bucket", default: "locgate-commands",
        "The Key-Value bucket of the gateways' commands to devices (settings.commands): a command submitted to any gateway goes through whichever holds the device's connection. Created when missing.")
    public static let timeoutOption = Option("timeout", default: Duration.seconds(10), minimum: .milliseconds(100),
        "How long a start waits for the cluster (the pipeline does not start without its state), and each state read or write for its answer; a write that failed is tried again a second later, holding the acknowledgements upstream.")

    /// Servers, credentials and TLS, read like the `nats` source's and sink's.
    public var connection = NATSConnectionOptions()
    public var bucket = NATSStateConfiguration.bucketOption.defaultValue
    public var commandsBucket = NATSStateConfiguration.commandsBucketOption.defaultValue
    /// Replicas of a bucket created here; nil: 3, or fewer when the cluster has fewer servers.
    public var replicas: Int?
    /// How long opening waits for the cluster, and each read or write for its answer.
    public var timeout = NATSStateConfiguration.timeoutOption.defaultValue

    public init() {}

    /// The options of `settings.state.nats`: the connection's, then the bucket's.
    public static let options: [OptionSpec] = NATSConnectionOptions.specs + [
        bucketOption.spec,
        OptionSpec("replicas", "integer, 1-5", default: "3, at most the servers of the cluster", "Replicas of the bucket when locgate creates it: a write is acknowledged once a majority stored it, so state survives the loss of a minority of the servers."),
        commandsBucketOption.spec,
        timeoutOption.spec,
    ]

    public static func read(_ options: inout OptionReader) -> NATSStateConfiguration {
        var c = NATSStateConfiguration()
        c.connection = NATSConnectionOptions.read(&options)
        let bucket = options.read(bucketOption)
        if bucket.isEmpty || !bucket.utf8.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }) {
            options.report("bucket", "a bucket name has only letters, digits, - and _, got \"\(bucket)\"")
        }
        c.bucket = bucket
        let commandsBucket = options.read(commandsBucketOption)
        if commandsBucket.isEmpty || commandsBucket == bucket
            || !commandsBucket.utf8.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }) {
            options.report("commands_bucket", "a bucket name other than bucket's, with only letters, digits, - and _, got \"\(commandsBucket)\"")
        }
        c.commandsBucket = commandsBucket
        c.replicas = options.optionalInt("replicas", in: 1...5)
        c.timeout = options.read(timeoutOption)
        return c
    }

    private static func isAlphanumeric(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
    }
}

/// Registers `settings.state.nats` (BuiltinPlugins does).
public enum NATSStateBackend: DeviceStateBackend {
    public static let key = "nats"
    public static var options: [OptionSpec] { NATSStateConfiguration.options }

    public static func configure(_ options: inout OptionReader) -> NATSStateConfiguration {
        NATSStateConfiguration.read(&options)
    }

    public static func location(of configuration: NATSStateConfiguration) -> String {
        "nats bucket \(configuration.bucket)"
    }

    public static func open(_ configuration: NATSStateConfiguration, settings: StateSettings, context: StateStoreContext) throws -> any DeviceStateStore {
        try NATSKeyValueStateStore(configuration, interval: settings.interval, maxAge: settings.maxAge, context: context)
    }

    public static func openCommands(_ configuration: NATSStateConfiguration, context: StateStoreContext) throws -> (any CommandStore)? {
        try NATSCommandStore(configuration: configuration, context: context)
    }
}
