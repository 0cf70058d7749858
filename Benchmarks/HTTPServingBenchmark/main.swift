// How many requests a second one HTTPServer answers, with 1 or more libmicrohttpd event threads,
// answering in the handler or later from another thread, with and without a crowd of idle
// connections held open. Run by Benchmarks/http_serving.sh:
//
//   HTTPServingBenchmark THREADS CLIENTS SECONDS [IDLE] [deferred]
//
// prints "threads=… clients=… idle=… mode=… requests=… seconds=… rps=… cpu_us_per_request=…".
// CLIENTS keep-alive connections, one blocking thread each, ask GET /small in a loop; the
// clients run in this process, so on a small machine they compete with the server for the cores,
// as a gateway's other work would. The one file of the benchmark that talks to the C library.
import Dispatch
import Foundation
import HTTPServing
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("HTTPServingBenchmark: \(message)\n".utf8))
    exit(1)
}

enum Socket {
    /// A blocking TCP connection to 127.0.0.1:`port` with Nagle off.
    @Sendable static func connect(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var to = sockaddr_in()
        to.sin_family = sa_family_t(AF_INET)
        to.sin_port = in_port_t(UInt16(port).bigEndian)
        to.sin_addr.s_addr = in_addr_t(UInt32(0x7f00_0001).bigEndian)
        let rc = withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard fd >= 0, rc == 0 else { fail("connect: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        guard setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else { fail("TCP_NODELAY") }
        return fd
    }

    /// Sends `request` and reads one response of a `bodyLength`-byte body, keeping what follows.
    static func ask(_ fd: Int32, _ request: [UInt8], bodyLength: Int, held: inout [UInt8], buffer: inout [UInt8]) {
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { fail("send") }
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { fail("recv: the server closed a keep-alive connection") }
            held += buffer[..<n]
            // A response ends after its body, which follows the blank line.
            if let end = held.indices.first(where: { held[$0...].starts(with: [13, 10, 13, 10]) }), held.count >= end + 4 + bodyLength {
                held.removeFirst(end + 4 + bodyLength)
                return
            }
        }
    }

    /// CPU time of this process so far.
    static func cpuMicroseconds() -> Int {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { fail("getrusage") }
        return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + Int(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
    }
}

final class Run: Sendable {
    let stop = Atomic<Bool>(false)
    let answered = Atomic<Int>(0)
}

func main() {
    let args = CommandLine.arguments
    guard args.count >= 4, let threads = Int(args[1]), let clients = Int(args[2]), let seconds = Double(args[3]) else {
        fail("usage: HTTPServingBenchmark THREADS CLIENTS SECONDS [IDLE] [deferred]")
    }
    let idle = args.count > 4 ? Int(args[4]) ?? 0 : 0
    let deferred = args.count > 5 && args[5] == "deferred"

    let body = Array(repeating: UInt8(ascii: "x"), count: 100)
    let limits = HTTPServer.Limits(connections: clients + idle + 64, requestDeadline: .seconds(3600))
    let server: HTTPServer
    do {
        server = try HTTPServer(host: "127.0.0.1", port: 0, limits: limits, threads: threads) { _, responder in
            let reply = HTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: body)
            if deferred {
                DispatchQueue.global().async { responder.respond(reply) }
            } else {
                responder.respond(reply)
            }
        }
    } catch {
        fail("\(error)")
    }
    // The crowd: connected, silent, holding their places.
    let crowd = (0..<idle).map { _ in Socket.connect(server.port) }

    let request = Array("GET /small HTTP/1.1\r\nHost: bench\r\n\r\n".utf8)
    let run = Run()
    let group = DispatchGroup()
    let cpuBefore = Socket.cpuMicroseconds()
    let started = ContinuousClock.now
    for _ in 0..<clients {
        group.enter()
        Thread {
            let fd = Socket.connect(server.port)
            var buffer = [UInt8](repeating: 0, count: 4096)
            var held: [UInt8] = []
            while !run.stop.load(ordering: .relaxed) {
                Socket.ask(fd, request, bodyLength: body.count, held: &held, buffer: &buffer)
                run.answered.add(1, ordering: .relaxed)
            }
            close(fd)
            group.leave()
        }.start()
    }
    Thread.sleep(forTimeInterval: seconds)
    run.stop.store(true, ordering: .relaxed)
    group.wait()
    let elapsed = ContinuousClock.now - started
    let cpu = Socket.cpuMicroseconds() - cpuBefore
    let n = run.answered.load(ordering: .relaxed)
    let secs = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    crowd.forEach { close($0) }
    server.stop()
    print("threads=\(threads) clients=\(clients) idle=\(idle) mode=\(deferred ? "deferred" : "immediate") requests=\(n) "
          + String(format: "seconds=%.2f rps=%.0f cpu_us_per_request=%.1f", secs, Double(n) / secs, Double(cpu) / Double(max(1, n))))
}

main()
