import CCurl
import Foundation
import GatewayCore
import Locking
import Synchronization

/// One HTTP request as the sink builds it.
struct HTTPRequest: Sendable {
    var method: String
    var url: String
    /// `Name: value` lines.
    var headers: [String]
    var body: [UInt8]
}

/// What came back from one request.
struct HTTPAnswer: Sendable {
    var status: Int
    var body: [UInt8]
    /// The `Retry-After` header, if any.
    var retryAfter: String?
    /// The `Location` header of a redirect, if any.
    var location: String? = nil
}

/// How requests travel: timeouts, TLS and proxy.
struct HTTPTransportOptions: Sendable, Equatable {
    var timeout: Duration = .seconds(30)
    var connectTimeout: Duration = .seconds(10)
    var tls = ClientTLSOptions()
    /// nil: libcurl reads `https_proxy`, `http_proxy`, `all_proxy` and `no_proxy` itself.
    var proxy: String?
}

/// A request that failed before an answer: libcurl's reason.
struct HTTPTransportError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// POST/PUT through libcurl on a thread of the transport's own. This is the only file that talks to libcurl.
///
/// Why a thread and curl's multi interface: a request that waits on a silent server must cost no
/// CPU (URLSession on Linux kept a dispatch source armed and spun: 80% of a core for 30 s), and a
/// cancelled task must end its request at once. The thread sleeps in `curl_multi_poll` on the
/// request's socket and curl's own timers; cancellation wakes it with `curl_multi_wakeup`.
///
/// One request at a time on one easy handle, kept between requests with the multi handle's
/// connection cache, so the connection is reused (keep-alive; HTTP/2 when a TLS server offers it).
/// Redirects are never followed: the sink sees the 3xx (a followed redirect re-sends a POST
/// without its body, and the final 2xx would delete a batch the server never got).
final class HTTPTransport: Sendable {
    private let engine: CurlEngine

    /// Engine threads not yet done freeing their handles, process-wide: a test checks that a
    /// sink's `run` never returns before its transport's thread is done.
    static let runningThreads = Atomic<Int>(0)
    /// Milliseconds the thread waits before freeing its handles, for that test only: without it the
    /// thread is usually done before anyone looks, and the test could not fail.
    static let cleanupPauseForTests = Atomic<Int>(0)

    init(options: HTTPTransportOptions) throws {
        engine = try CurlEngine(options: options)
        let engine = self.engine
        HTTPTransport.runningThreads.add(1, ordering: .relaxed)
        let thread = Thread {
            engine.serve()
            HTTPTransport.runningThreads.subtract(1, ordering: .relaxed)
            engine.markFinished()
        }
        thread.name = "locgate-http"
        thread.start()
    }

    deinit { engine.stop() }

    /// Stops the thread (a request in flight is abandoned) and returns once it has freed the
    /// libcurl handles. The sink awaits this before its `run` returns: a thread still freeing
    /// curl's connections and TLS state while the process exits raced OpenSSL's and libc's exit
    /// handlers, and corrupted the heap (`corrupted size vs. prev_size`, SIGABRT after "pipeline:
    /// stopped", once in about 20 runs of HangingServerTests).
    func close() async {
        engine.stop()
        await engine.finished()
    }

    /// Sends the request; throws ``HTTPTransportError`` for network and TLS faults, timeouts
    /// included, and `CancellationError` when the task is cancelled (the request is abandoned at once).
    func send(_ request: HTTPRequest) async throws -> HTTPAnswer {
        let job = CurlJob(request: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HTTPAnswer, any Error>) in
                job.continuation.withLock { $0 = c }
                engine.submit(job)
            }
        } onCancel: {
            job.cancelled.store(true, ordering: .relaxed)
            engine.wake()
        }
    }
}

/// One request handed to the engine's thread.
private final class CurlJob: Sendable {
    let request: HTTPRequest
    let cancelled = Atomic<Bool>(false)
    let continuation = Locked<CheckedContinuation<HTTPAnswer, any Error>?>(nil)

    init(request: HTTPRequest) { self.request = request }

    func finish(_ result: Result<HTTPAnswer, any Error>) {
        let c = continuation.withLock { c in
            let taken = c
            c = nil
            return taken
        }
        c?.resume(with: result)
    }
}

/// What libcurl writes while a request runs (callbacks get it through `userdata`).
private final class ResponseBuffer {
    var body: [UInt8] = []
    var retryAfter: String?
    var location: String?
    /// Bodies beyond this are cut: the sink keeps 500 characters for logs and dead letters.
    static let maxBody = 1 << 20

    func reset() {
        body.removeAll(keepingCapacity: true)
        retryAfter = nil
        location = nil
    }
}

/// The multi and easy handles and the thread's mailbox. The handles are touched only on the thread.
private final class CurlEngine: @unchecked Sendable {
    // Set once in init; used only on the engine's thread after that (and freed there).
    private let multi: UnsafeMutableRawPointer
    private let easy: UnsafeMutableRawPointer
    private let options: HTTPTransportOptions
    private let mailbox = NSCondition()
    // Guarded by `mailbox`.
    private var queued: [CurlJob] = []
    private var stopping = false
    // Guarded by `mailbox`: set once `serve` has returned; who waits for it before then.
    private var done = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    init(options: HTTPTransportOptions) throws {
        guard CurlEngine.globalInit == CURLE_OK, let m = curl_multi_init() else {
            throw HTTPTransportError(message: "libcurl could not be initialised")
        }
        guard let e = curl_easy_init() else {
            curl_multi_cleanup(m)
            throw HTTPTransportError(message: "libcurl could not create a handle")
        }
        multi = m
        easy = e
        self.options = options
    }

    func submit(_ job: CurlJob) {
        mailbox.lock()
        queued.append(job)
        mailbox.signal()
        mailbox.unlock()
    }

    /// Wakes the thread out of `curl_multi_poll` (thread-safe in libcurl).
    /// Both wake the thread under the mailbox lock: the thread frees `multi` only after it saw
    /// `stopping` under that lock, so a wakeup can never reach a freed handle.
    func wake() {
        mailbox.lock()
        if !stopping { curl_multi_wakeup(multi) }
        mailbox.signal()
        mailbox.unlock()
    }

    func stop() {
        mailbox.lock()
        if !stopping { curl_multi_wakeup(multi) }
        stopping = true
        mailbox.signal()
        mailbox.unlock()
    }

    /// Called on the thread once `serve` returned: resumes those waiting in ``finished()``.
    func markFinished() {
        mailbox.lock()
        done = true
        let waiting = waiters
        waiters = []
        mailbox.unlock()
        for w in waiting { w.resume() }
    }

    /// Returns once the thread has freed the handles (at once when it already has).
    func finished() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            mailbox.lock()
            if done {
                mailbox.unlock()
                c.resume()
            } else {
                waiters.append(c)
                mailbox.unlock()
            }
        }
    }

    /// The thread's loop: takes one job at a time until stopped, then frees the handles.
    func serve() {
        while true {
            mailbox.lock()
            while queued.isEmpty && !stopping { mailbox.wait() }
            if stopping {
                let left = queued
                queued = []
                mailbox.unlock()
                for job in left { job.finish(.failure(CancellationError())) }
                break
            }
            let job = queued.removeFirst()
            mailbox.unlock()
            if job.cancelled.load(ordering: .relaxed) {
                job.finish(.failure(CancellationError()))
                continue
            }
            job.finish(perform(job))
        }
        let pause = HTTPTransport.cleanupPauseForTests.load(ordering: .relaxed)
        if pause > 0 { usleep(UInt32(pause) * 1000) }
        curl_easy_cleanup(easy)
        curl_multi_cleanup(multi)
    }

    private func perform(_ job: CurlJob) -> Result<HTTPAnswer, any Error> {
        let response = ResponseBuffer()
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        // libcurl reads the body from this copy while the transfer runs.
        let body = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, job.request.body.count))
        _ = body.initialize(from: job.request.body)
        defer { body.deallocate() }

        let configured: Result<Void, HTTPTransportError> = Result {
            try configure(job.request, headers: &headers, body: body, response: response, errorBuffer: errorBuffer)
        }.mapError { $0 as? HTTPTransportError ?? HTTPTransportError(message: "\($0)") }
        if case .failure(let e) = configured { return .failure(e) }

        guard curl_multi_add_handle(multi, easy) == CURLM_OK else {
            return .failure(HTTPTransportError(message: "libcurl refused the request"))
        }
        defer { curl_multi_remove_handle(multi, easy) }
        var running: Int32 = 1
        while true {
            if job.cancelled.load(ordering: .relaxed) { return .failure(CancellationError()) }
            guard curl_multi_perform(multi, &running) == CURLM_OK else {
                return .failure(HTTPTransportError(message: "libcurl failed to drive the request"))
            }
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE else { continue }
                let code = message.pointee.data.result
                guard code == CURLE_OK else {
                    let detail = String(cString: errorBuffer)
                    let reason = String(cString: curl_easy_strerror(code))
                    return .failure(HTTPTransportError(message: detail.isEmpty ? reason : "\(reason): \(detail)"))
                }
                var status = 0
                _ = locgate_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
                return .success(HTTPAnswer(status: status, body: response.body, retryAfter: response.retryAfter, location: response.location))
            }
            // Sleeps on the socket and curl's timers; a cancellation wakes it.
            guard curl_multi_poll(multi, nil, 0, 1000, nil) == CURLM_OK else {
                return .failure(HTTPTransportError(message: "libcurl failed to wait for the request"))
            }
        }
    }

    private func check(_ code: CURLcode, _ what: String) throws {
        guard code == CURLE_OK else {
            throw HTTPTransportError(message: "cannot set \(what): \(String(cString: curl_easy_strerror(code)))")
        }
    }

    private func configure(_ request: HTTPRequest, headers: inout UnsafeMutablePointer<curl_slist>?,
                           body: UnsafeMutableBufferPointer<UInt8>, response: ResponseBuffer,
                           errorBuffer: UnsafeMutablePointer<CChar>) throws {
        curl_easy_reset(easy)  // keeps the connection and caches, forgets the last request's options
        try check(locgate_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1), "nosignal")
        try check(locgate_curl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer), "error buffer")
        try check(locgate_curl_setopt_string(easy, CURLOPT_URL, request.url), "url")
        try check(locgate_curl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0), "redirects")
        try check(locgate_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)), "http version")
        try check(locgate_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(options.timeout.milliseconds)), "timeout")
        try check(locgate_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout.milliseconds)), "connect timeout")
        if request.method != "POST" {
            try check(locgate_curl_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method), "method")
        }
        try check(locgate_curl_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)), "body size")
        try check(locgate_curl_setopt_pointer(easy, CURLOPT_POSTFIELDS, body.baseAddress), "body")
        // "Expect:" stops curl from waiting for a 100 Continue that many servers never send.
        for line in request.headers + ["Expect:"] { headers = curl_slist_append(headers, line) }
        try check(locgate_curl_setopt_pointer(easy, CURLOPT_HTTPHEADER, headers), "headers")
        if let ca = options.tls.caFile { try check(locgate_curl_setopt_string(easy, CURLOPT_CAINFO, ca), "tls.ca_file") }
        if let cert = options.tls.certFile { try check(locgate_curl_setopt_string(easy, CURLOPT_SSLCERT, cert), "tls.cert_file") }
        if let key = options.tls.keyFile { try check(locgate_curl_setopt_string(easy, CURLOPT_SSLKEY, key), "tls.key_file") }
        if !options.tls.verify {
            try check(locgate_curl_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 0), "tls.verify")
            try check(locgate_curl_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 0), "tls.verify")
        }
        if let proxy = options.proxy { try check(locgate_curl_setopt_string(easy, CURLOPT_PROXY, proxy), "proxy") }
        let userdata = Unmanaged.passUnretained(response).toOpaque()
        try check(locgate_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, userdata), "write data")
        try check(locgate_curl_setopt_callback(easy, CURLOPT_WRITEFUNCTION, { data, size, count, userdata in
            guard let data, let userdata else { return 0 }
            let response = Unmanaged<ResponseBuffer>.fromOpaque(userdata).takeUnretainedValue()
            let n = size * count
            let room = max(0, ResponseBuffer.maxBody - response.body.count)
            data.withMemoryRebound(to: UInt8.self, capacity: n) { p in
                response.body.append(contentsOf: UnsafeBufferPointer(start: p, count: min(n, room)))
            }
            return n
        }), "write function")
        try check(locgate_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, userdata), "header data")
        try check(locgate_curl_setopt_callback(easy, CURLOPT_HEADERFUNCTION, { data, size, count, userdata in
            guard let data, let userdata else { return 0 }
            let response = Unmanaged<ResponseBuffer>.fromOpaque(userdata).takeUnretainedValue()
            let n = size * count
            let line = data.withMemoryRebound(to: UInt8.self, capacity: n) { String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self) }
            // A new status line (after a 1xx, or through a proxy's CONNECT) starts a new answer.
            if line.hasPrefix("HTTP/") {
                response.reset()
            } else if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
                if name == "retry-after" { response.retryAfter = value }
                if name == "location" { response.location = value }
            }
            return n
        }), "header function")
    }
}
