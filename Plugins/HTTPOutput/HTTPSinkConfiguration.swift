import GatewayCore
import Outbox

/// Configuration of the `http` sink (see the README for every option with its default).
public struct HTTPSinkConfiguration: Sendable {
    public enum Method: String, Sendable { case post = "POST", put = "PUT" }

    /// What to do when a 2xx answer fails the `success.json` predicate.
    public enum OnMismatch: String, Sendable { case retry, deadLetter = "dead_letter" }

    public var url: String = ""
    public var method: Method = .post
    /// Header values after `${ENV}` substitution.
    public var headers: [(name: String, value: String)] = []
    /// Full `Authorization` header value (`Bearer …` or `Basic …`), if configured.
    public var authorization: String?
    public var timeout: Duration = .seconds(30)
    public var gzip = false

    public var maxPositions = 500
    public var maxBytes = 1_000_000
    public var interval: Duration = .seconds(10)

    public var body: BodyFormat = .jsonArray

    public var successPredicate: ResponsePredicate?
    public var onMismatch: OnMismatch = .retry

    public var retryInitial: Duration = .seconds(1)
    public var retryMax: Duration = .seconds(60)
    /// 0 retries forever.
    public var retryMaxAttempts = 0

    /// Where undelivered positions wait (the `queue` options every delivering sink shares).
    public var queue: OutboxMode = .memory(maxRecords: OutboxOptions.memoryCapacity)

    public init() {}
}
