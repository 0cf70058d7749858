import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What came back from one request.
struct HTTPAnswer: Sendable {
    var status: Int
    var body: [UInt8]
    /// The `Retry-After` header, if any.
    var retryAfter: String?
}

/// One POST/PUT through URLSession, cancellable from Swift concurrency.
final class HTTPTransport: Sendable {
    private let session: URLSession

    init(timeout: Duration) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout.secondsDouble
        configuration.timeoutIntervalForResource = timeout.secondsDouble
        configuration.httpMaximumConnectionsPerHost = 1
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    deinit { session.invalidateAndCancel() }

    /// Sends the request; throws `URLError` for network faults and `CancellationError` when cancelled.
    func send(_ request: URLRequest) async throws -> HTTPAnswer {
        let box = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HTTPAnswer, any Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        c.resume(throwing: (error as? URLError)?.code == .cancelled ? CancellationError() : error)
                        return
                    }
                    guard let http = response as? HTTPURLResponse else {
                        c.resume(throwing: URLError(.badServerResponse))
                        return
                    }
                    c.resume(returning: HTTPAnswer(status: http.statusCode, body: data.map { Array($0) } ?? [],
                                                   retryAfter: http.value(forHTTPHeaderField: "Retry-After")))
                }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
    }
}

/// Holds the running task so a cancellation that races its creation still cancels it.
private final class TaskBox: @unchecked Sendable {
    // Guarded by `lock`; URLSessionDataTask is not Sendable.
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    func set(_ t: URLSessionDataTask) {
        lock.lock()
        task = t
        let cancelNow = cancelled
        lock.unlock()
        if cancelNow { t.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let t = task
        lock.unlock()
        t?.cancel()
    }
}
