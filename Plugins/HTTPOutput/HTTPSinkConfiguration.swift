import GatewayCore
import DeliveryEngine

/// Configuration of the `http` sink (see the README for every option with its default).
public struct HTTPSinkConfiguration: QueuedSinkConfiguration {
    public enum Method: String, Sendable, CaseIterable { case post = "POST", put = "PUT" }

    /// What to do when a 2xx answer fails the `success.json` predicate.
    public enum OnMismatch: String, Sendable, CaseIterable { case retry, deadLetter = "dead_letter" }

    public var url: String = ""
    public var method = HTTPSinkPlugin.method.defaultValue
    /// Header values after `${ENV}` substitution.
    public var headers: [(name: String, value: String)] = []
    /// Full `Authorization` header value (`Bearer …` or `Basic …`), if configured.
    public var authorization: String?
    public var timeout = HTTPSinkPlugin.timeout.defaultValue
    public var connectTimeout = HTTPSinkPlugin.connectTimeout.defaultValue
    /// A private CA, a client certificate for mutual TLS; `verify` false accepts any server
    /// certificate (logged as a warning at start).
    public var tls = ClientTLSOptions()
    /// Proxy URL; nil lets libcurl read the standard proxy variables, "" uses no proxy at all.
    public var proxy: String?
    public var gzip = HTTPSinkPlugin.gzip.defaultValue

    public var maxPositions = HTTPSinkPlugin.maxPositions.defaultValue
    public var maxBytes = HTTPSinkPlugin.maxBytes.defaultValue
    public var interval = HTTPSinkPlugin.interval.defaultValue

    public var body: BodyFormat = .jsonArray

    public var successPredicate: ResponsePredicate?
    public var onMismatch = HTTPSinkPlugin.onMismatch.defaultValue

    public var retryInitial = HTTPSinkPlugin.retryInitial.defaultValue
    public var retryMax = HTTPSinkPlugin.retryMax.defaultValue
    /// 0 retries forever.
    public var retryMaxAttempts = HTTPSinkPlugin.retryMaxAttempts.defaultValue

    /// Where undelivered positions wait (the `queue` options every delivering sink shares).
    public var queue: OutboxMode = .memory(maxRecords: OutboxOptions.memoryCapacity)

    public init() {}

    var transport: HTTPTransportOptions {
        HTTPTransportOptions(timeout: timeout, connectTimeout: connectTimeout, tls: tls, proxy: proxy)
    }
}
