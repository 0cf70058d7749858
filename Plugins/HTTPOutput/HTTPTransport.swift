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
    /// The `Location` header of a redirect, if any.
    var location: String? = nil
}

/// Refuses every redirect so the sink sees the 3xx itself. Following one is a silent loss:
/// Foundation re-sends a 301/302 as a GET without the body, a 307/308 without the body too, and
/// the final 2xx would delete the batch from the queue although the server never got it.
final class RefuseRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
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
        session = URLSession(configuration: configuration, delegate: RefuseRedirects(), delegateQueue: nil)
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
                                                   retryAfter: http.value(forHTTPHeaderField: "Retry-After"),
                                                   location: http.value(forHTTPHeaderField: "Location")))
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
