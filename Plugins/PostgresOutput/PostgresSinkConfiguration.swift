import GatewayCore
import Geodesy
import DeliveryEngine

/// Configuration of the `postgres` sink (see the README for every option with its default).
public struct PostgresSinkConfiguration: QueuedSinkConfiguration {
    /// A libpq connection string (`postgresql://user@host:port/db?sslmode=…` or `key=value …`);
    /// nil leaves everything to libpq's `PG*` environment variables and defaults.
    public var url: String?
    /// Overrides a password in `url` (and `PGPASSWORD`); registered as a secret.
    public var password: String?
    public var sslMode: String?
    public var sslRootCert: String?
    public var connectTimeout = PostgresSinkPlugin.connectTimeout.defaultValue
    public var statementTimeout = PostgresSinkPlugin.statementTimeout.defaultValue
    public var tables = PostgresTables()
    public var createTables = PostgresSinkPlugin.createTables.defaultValue
    /// Where GCJ-02 applies when converting back to WGS84 (as the `coordinates` transform's option).
    public var chinaBounds = PostgresSinkPlugin.chinaBounds.defaultValue

    public var maxPositions = PostgresSinkPlugin.maxPositions.defaultValue
    public var interval = PostgresSinkPlugin.interval.defaultValue

    public var retryInitial = PostgresSinkPlugin.retryInitial.defaultValue
    public var retryMax = PostgresSinkPlugin.retryMax.defaultValue

    /// Where undelivered positions wait (the `queue` options every delivering sink shares).
    public var queue: OutboxMode = .memory(maxRecords: OutboxOptions.memoryCapacity)

    public init() {}

    /// libpq's connection parameters: what the sink sets unless the connection string says
    /// otherwise, the string itself, then what the options set explicitly (which wins).
    func connectionParameters(applicationName: String, connectTimeout: Duration) -> [(String, String)] {
        var p: [(String, String)] = [("application_name", applicationName)]
        // A peer that vanishes without a reset is noticed by the kernel within about a minute.
        p += [("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3")]
        if let url { p.append(("dbname", url)) }
        // libpq counts whole seconds and treats less than 2 as 2; the sink enforces the exact deadline.
        p.append(("connect_timeout", String(max(2, Int((connectTimeout.secondsDouble).rounded(.up))))))
        if let password, !password.isEmpty { p.append(("password", password)) }
        if let sslMode { p.append(("sslmode", sslMode)) }
        if let sslRootCert { p.append(("sslrootcert", sslRootCert)) }
        // Text is written as UTF-8 whatever the client's locale says.
        p.append(("client_encoding", "UTF8"))
        return p
    }
}
