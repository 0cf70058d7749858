// Positions/s of a u-blox receiver's UBX NAV-PVT stream beside the NMEA (GGA + RMC) stream of
// the same epochs, and the latency of RTCM frames through the NTRIP client.
//
// 1. Replay: EPOCHS seeded epochs (a vehicle's random walk, 10 Hz, RTK status changing) written
//    both as NAV-PVT frames (100 bytes an epoch) and as $GNGGA + $GNRMC (about 150 bytes), each
//    decoded from memory in 4 KiB reads, five rounds: the UBX stream through ReceiverStreamDecoder,
//    the NMEA stream through NMEADecoder (what NMEA sources use) and through ReceiverStreamDecoder
//    (what they use once UBX is read on the same port). Positions/s per round, the median, and
//    the ratio UBX / NMEA (≥ 1: binary should not be slower than text).
// 2. NTRIP: a caster on loopback (a thread here) sends rtcm3.2's frames in bursts every 100 ms
//    for SECONDS; the time from the caster's send to the client's writer, per frame: p50, p99, max.
//
// Usage: ReceiverStreamBenchmark [EPOCHS] [SECONDS] [RTCM_LOG]
// PROFILE=ubx runs only the UBX replay, twenty times, for `perf record`.
import Foundation
import GatewayCore
import Locking
import NMEA
import NTRIP
import ReceiverStream
import RTCM
import UBX
#if canImport(Glibc)
import Glibc
#endif

struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

struct Epoch {
    var ms: Int64
    var lat: Double, lon: Double, alt: Double, speed: Double, course: Double
    var carrSoln: UInt8
    var numSV: UInt8
}

func makeEpochs(_ n: Int) -> [Epoch] {
    var rng = SeededGenerator(state: 47)
    var lat = 48.2, lon = 16.37, course = 90.0
    let start: Int64 = 1_772_366_400_000
    return (0..<n).map { i in
        course = (course + Double.random(in: -5...5, using: &rng) + 360).truncatingRemainder(dividingBy: 360)
        let speed = Double.random(in: 0...15, using: &rng)
        lat += speed * 0.1 * cos(course * .pi / 180) / 111_320
        lon += speed * 0.1 * sin(course * .pi / 180) / (111_320 * cos(lat * .pi / 180))
        return Epoch(ms: start + Int64(i) * 100, lat: lat, lon: lon, alt: 180 + Double.random(in: -1...1, using: &rng),
                     speed: speed, course: course, carrSoln: UInt8(i / 600 % 3), numSV: UInt8.random(in: 12...30, using: &rng))
    }
}

func navPVT(_ e: Epoch) -> [UInt8] {
    var p = [UInt8](repeating: 0, count: 92)
    func put<T: FixedWidthInteger>(_ v: T, _ o: Int) { withUnsafeBytes(of: v.littleEndian) { for (k, b) in $0.enumerated() { p[o + k] = b } } }
    let days = e.ms / 86_400_000
    let (y, m, d) = Timestamp.civilFromDays(Int(days))
    let msOfDay = e.ms % 86_400_000
    put(UInt32(truncatingIfNeeded: e.ms % 604_800_000), 0)
    put(UInt16(y), 4); p[6] = UInt8(m); p[7] = UInt8(d)
    p[8] = UInt8(msOfDay / 3_600_000); p[9] = UInt8(msOfDay / 60_000 % 60); p[10] = UInt8(msOfDay / 1000 % 60)
    p[11] = 0x07
    put(Int32(msOfDay % 1000) * 1_000_000, 16)
    p[20] = 3
    p[21] = 0x01 | (e.carrSoln > 0 ? 0x02 : 0) | (e.carrSoln << 6)
    p[23] = e.numSV
    put(Int32((e.lon * 1e7).rounded()), 24); put(Int32((e.lat * 1e7).rounded()), 28)
    put(Int32((e.alt * 1000 + 45_000).rounded()), 32); put(Int32((e.alt * 1000).rounded()), 36)
    put(UInt32(14), 40); put(UInt32(21), 44)
    put(Int32((e.speed * 1000).rounded()), 60); put(Int32((e.course * 1e5).rounded()), 64)
    put(UInt32(80), 68); put(UInt32(150_000), 72); put(UInt16(123), 76)
    return UBXFrame.encode(.navPVT, payload: p)
}

func nmea(_ e: Epoch) -> [UInt8] {
    let msOfDay = e.ms % 86_400_000
    func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
    let time = two(msOfDay / 3_600_000) + two(msOfDay / 60_000 % 60) + two(msOfDay / 1000 % 60) + "." + two(msOfDay / 10 % 100)
    let (y, m, d) = Timestamp.civilFromDays(Int(e.ms / 86_400_000))
    let date = two(Int64(d)) + two(Int64(m)) + two(Int64(y % 100))
    func angle(_ v: Double, _ digits: Int) -> String {
        let deg = Int(v), min = (v - Double(deg)) * 60
        return String(format: "%0\(digits)d%010.7f", deg, min)
    }
    let q = [1, 5, 4][Int(e.carrSoln)]
    let gga = "GNGGA,\(time),\(angle(e.lat, 2)),N,\(angle(e.lon, 3)),E,\(q),\(e.numSV),0.6,\(String(format: "%.3f", e.alt)),M,45.000,M,1.0,0000"
    let rmc = "GNRMC,\(time),A,\(angle(e.lat, 2)),N,\(angle(e.lon, 3)),E,\(String(format: "%.3f", e.speed / 0.514444)),\(String(format: "%.2f", e.course)),\(date),,,\(["A", "F", "R"][Int(e.carrSoln)]),V"
    return Array((NMEAChecksum.sentence(body: gga) + NMEAChecksum.sentence(body: rmc)).utf8)
}

func options() -> NMEAOptions {
    var o = NMEAOptions()
    o.source = "bench"
    o.idPrefix = "bench-"
    return o
}

/// Decodes `stream` in 4 KiB reads; positions and seconds.
func replay(_ stream: [UInt8], decode: (UnsafeRawBufferPointer, inout [Position]) -> Void, flush: (inout [Position]) -> Void) -> (Int, Double) {
    var out: [Position] = []
    out.reserveCapacity(64)
    var count = 0
    let start = ContinuousClock.now
    stream.withUnsafeBytes { all in
        var i = 0
        while i < all.count {
            let n = min(4096, all.count - i)
            decode(UnsafeRawBufferPointer(rebasing: all[i..<(i + n)]), &out)
            count += out.count
            out.removeAll(keepingCapacity: true)
            i += n
        }
    }
    flush(&out)
    count += out.count
    let d = ContinuousClock.now - start
    return (count, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
}

func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }

let args = CommandLine.arguments
let epochCount = args.count > 1 ? Int(args[1]) ?? 200_000 : 200_000
let seconds = args.count > 2 ? Int(args[2]) ?? 10 : 10
let epochs = makeEpochs(epochCount)
let ubxStream = epochs.flatMap(navPVT)
// PROFILE=ubx: only the UBX replay, over and over (for perf), then exit.
if ProcessInfo.processInfo.environment["PROFILE"] == "ubx" {
    for _ in 0..<20 {
        var u = ReceiverStreamDecoder(options: options())
        _ = replay(ubxStream, decode: { u.decode($0, into: &$1) }, flush: { u.flush(into: &$0) })
    }
    exit(0)
}
let nmeaStream = epochs.flatMap(nmea)
print("receiver stream replay: \(epochCount) epochs; UBX \(ubxStream.count) bytes (NAV-PVT), NMEA \(nmeaStream.count) bytes (GGA + RMC)")
var ubxRates: [Double] = [], nmeaRates: [Double] = [], nmeaMixedRates: [Double] = []
for round in 1...5 {
    var u = ReceiverStreamDecoder(options: options())
    let (uc, us) = replay(ubxStream, decode: { u.decode($0, into: &$1) }, flush: { u.flush(into: &$0) })
    var n = NMEADecoder(options: options())
    let (nc, ns) = replay(nmeaStream, decode: { n.decode($0, into: &$1) }, flush: { n.flush(into: &$0) })
    var m = ReceiverStreamDecoder(options: options())
    let (mc, ms) = replay(nmeaStream, decode: { m.decode($0, into: &$1) }, flush: { m.flush(into: &$0) })
    guard uc == epochCount, nc == epochCount, mc == epochCount else {
        print("positions: UBX \(uc), NMEA \(nc), NMEA through the receiver stream \(mc): expected \(epochCount) each")
        exit(1)
    }
    ubxRates.append(Double(uc) / us); nmeaRates.append(Double(nc) / ns); nmeaMixedRates.append(Double(mc) / ms)
    print(String(format: "  round %d: UBX NAV-PVT %9.0f positions/s   NMEA %9.0f positions/s   NMEA via ReceiverStreamDecoder %9.0f positions/s   ratio UBX/NMEA %.2f",
                 round, ubxRates.last!, nmeaRates.last!, nmeaMixedRates.last!, ubxRates.last! / nmeaRates.last!))
}
print(String(format: "median: UBX NAV-PVT %.0f positions/s, NMEA %.0f positions/s (%.0f through ReceiverStreamDecoder); ratio UBX/NMEA %.2f (target >= 1)",
             median(ubxRates), median(nmeaRates), median(nmeaMixedRates), median(ubxRates) / median(nmeaRates)))

// MARK: - NTRIP latency

let rtcmPath = args.count > 3 ? args[3] : "Tests/ReceiverStreamTests/Fixtures/rtcm/rtcm3.2.log"
guard let file = FileManager.default.contents(atPath: rtcmPath) else { print("no \(rtcmPath)"); exit(1) }
var framer = RTCMStreamFramer()
var frames: [[UInt8]] = []
Array(file).withUnsafeBytes { framer.feed($0) { frames.append(Array($0)) } }

final class Stamps: @unchecked Sendable {
    let sent = Locked<[ContinuousClock.Instant]>([])
    let received = Locked<[ContinuousClock.Instant]>([])
}
let stamps = Stamps()

struct StampingWriter: RTCMFrameWriter {
    let stamps: Stamps
    func write(_ frame: [UInt8]) async throws { let now = ContinuousClock.now; stamps.received.withLock { $0.append(now) } }
}

// The caster: one connection, ICY 200 OK, then a burst of 10 frames every 100 ms.
let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
var address = sockaddr_in()
address.sin_family = sa_family_t(AF_INET)
address.sin_addr.s_addr = inet_addr("127.0.0.1")
_ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
listen(listener, 1)
var length = socklen_t(MemoryLayout<sockaddr_in>.size)
_ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
let port = Int(UInt16(bigEndian: address.sin_port))
let bursts = seconds * 10
let total = bursts * 10
/// The caster's side: accepts one client, answers ICY 200 OK, sends the bursts, stamps each frame.
func startCaster(listener: Int32, frames: [[UInt8]], bursts: Int, stamps: Stamps) {
    Thread.detachNewThread {
        let fd = accept(listener, nil, nil)
        var head: [UInt8] = []
        var b: UInt8 = 0
        while !(head.suffix(4) == [13, 10, 13, 10]), recv(fd, &b, 1, 0) == 1 { head.append(b) }
        _ = "ICY 200 OK\r\n".withCString { send(fd, $0, 12, Int32(MSG_NOSIGNAL)) }
        var k = 0
        for _ in 0..<bursts {
            let burstStart = ContinuousClock.now
            for _ in 0..<10 {
                let f = frames[k % frames.count]
                let now = ContinuousClock.now
                stamps.sent.withLock { $0.append(now) }
                _ = f.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                k += 1
            }
            let left = burstStart.advanced(by: .milliseconds(100)) - ContinuousClock.now
            if left > .zero { Thread.sleep(forTimeInterval: Double(left.components.attoseconds) / 1e18 + Double(left.components.seconds)) }
        }
        Thread.sleep(forTimeInterval: 0.5)
        close(fd)
    }
}
startCaster(listener: listener, frames: frames, bursts: bursts, stamps: stamps)
var configuration = NTRIPConfiguration(host: "127.0.0.1", port: port, mountpoint: "BENCH")
configuration.version = 1
configuration.gga = .never
let client = NTRIPClient(configuration: configuration, writer: StampingWriter(stamps: stamps), lastFix: { nil }, clock: SystemClock(),
                         logger: Logger(label: "bench", handler: SilentLogHandler()))
let task = Task { try await client.run() }
let deadline = ContinuousClock.now + .seconds(seconds + 10)
while stamps.received.withLock({ $0.count }) < total && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
task.cancel()
let sent = stamps.sent.withLock { $0 }, received = stamps.received.withLock { $0 }
guard received.count == total else { print("ntrip: \(received.count) of \(total) frames arrived"); exit(1) }
let latencies = zip(sent, received).map { pair -> Double in let d = pair.1 - pair.0; return Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }.sorted()
print(String(format: "ntrip: %d frames in %d bursts of 10 every 100 ms, caster send → writer: p50 %.2f ms, p99 %.2f ms, max %.2f ms",
             total, bursts, latencies[latencies.count / 2], latencies[latencies.count * 99 / 100], latencies.last ?? 0))
