import Foundation
import GatewayTesting
import Geodesy
import Testing

/// The job locgate was born for, end to end with the built binary: track a receiver; upload
/// batches only while inside a park fenced on a Baidu map; in BD-09; skip fixes that did not move
/// 10 m but still report while standing still; drop the queue only after the server acknowledged.
@Suite(.timeLimit(.minutes(5)), .serialized) struct MotivatingPipelineTests {
    /// A scripted drive in Shanghai, 1 Hz: 120 s parked at `start` (with ±0.5 m jitter), then
    /// 200 s driving east at 6 m/s (12 m in two fixes, clear of the 10 m threshold).
    struct Drive {
        static let start = GeoPoint(latitude: 31.2304, longitude: 121.4737)
        static let t0 = 1_714_557_600  // 2024-05-01T10:00:00Z

        static func position(at second: Int) -> GeoPoint {
            let jitter = second < 120 ? Double((second * 7919) % 11 - 5) / 10 : 0
            let east = second < 120 ? jitter : Double(second - 119) * 6
            let p = Geodesic.destination(from: start, distance: abs(east), bearing: east >= 0 ? 90 : 270)
            return Geodesic.destination(from: p, distance: abs(jitter), bearing: jitter >= 0 ? 0 : 180)
        }

        static func checksum(_ body: String) -> String {
            String(format: "%02X", body.utf8.reduce(UInt8(0), ^))
        }

        static func nmea() -> String {
            var text = "# scripted drive in Shanghai\n"
            for s in 0..<320 {
                let p = position(at: s)
                let t = t0 + s
                let hh = (t / 3600) % 24, mm = (t / 60) % 60, ss = t % 60
                let time = String(format: "%02d%02d%02d.00", hh, mm, ss)
                func dm(_ v: Double, _ width: Int) -> String {
                    let d = Int(v)
                    return String(format: "%0\(width)d%09.6f", d, (v - Double(d)) * 60)
                }
                let lat = dm(p.latitude, 2), lon = dm(p.longitude, 3)
                let speedKnots = s < 120 ? 0.0 : 6 / 0.514444
                for body in [
                    "GPGGA,\(time),\(lat),N,\(lon),E,1,10,0.8,12.0,M,8.0,M,,",
                    "GPRMC,\(time),A,\(lat),N,\(lon),E,\(String(format: "%.2f", speedKnots)),90.0,010524,,,A",
                ] {
                    text += "$\(body)*\(checksum(body))\r\n"
                }
            }
            return text
        }

        /// The park: a rectangle from 300 m west to 500 m east of the start, 300 m north and south,
        /// drawn on a Baidu map (BD-09).
        static func parkGeoJSON() -> String {
            let west = Geodesic.destination(from: start, distance: 300, bearing: 270).longitude
            let east = Geodesic.destination(from: start, distance: 500, bearing: 90).longitude
            let north = Geodesic.destination(from: start, distance: 300, bearing: 0).latitude
            let south = Geodesic.destination(from: start, distance: 300, bearing: 180).latitude
            let corners = [(west, south), (east, south), (east, north), (west, north), (west, south)].map { lon, lat in
                let b = ChinaDatums.wgs84ToBD09(GeoPoint(latitude: lat, longitude: lon))
                return "[\(b.longitude),\(b.latitude)]"
            }
            return #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"park","name":"Century Park"},"geometry":{"type":"Polygon","coordinates":[[\#(corners.joined(separator: ","))]]}}]}"#
        }
    }

    @Test func onlyInsideMovedOrHeartbeatPositionsArriveInBD09AndTheQueueEmpties() throws {
        let dir = try makeTemporaryDirectoryURL()
        try Data(Drive.nmea().utf8).write(to: dir.appendingPathComponent("drive.nmea"))
        try Data(Drive.parkGeoJSON().utf8).write(to: dir.appendingPathComponent("park.geojson"))
        let received = dir.appendingPathComponent("received.jsonl")
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        receiver.arguments = ["python3", LocgateBinary.packageRoot.appendingPathComponent("Tests/HTTPOutputTests/Support/receiver.py").path,
                              "--record", received.path, "--port", "0"]
        let out = Pipe()
        receiver.standardOutput = out
        try receiver.run()
        defer { receiver.terminate(); receiver.waitUntilExit() }
        var line: [UInt8] = []
        while let b = try out.fileHandleForReading.read(upToCount: 1)?.first, b != 10 { line.append(b) }
        let port = try #require(Int(String(decoding: line, as: UTF8.self).split(separator: " ").last ?? ""))

        try Data("""
        {"settings":{"stats_interval":false},
         "sources":{"receiver":{"type":"file","path":"drive.nmea"}},
         "transforms":{
           "good":{"type":"quality_filter","inputs":["receiver"],"min_mode":"2d","max_hdop":5},
           "moved":{"type":"distance_filter","inputs":["good"],"min_distance_m":10,"heartbeat":"30s"},
           "in_park":{"type":"geofence","inputs":["moved"],"fences":"park.geojson","fence_datum":"bd09","action":"keep_inside"},
           "baidu":{"type":"coordinates","inputs":["in_park"],"to":"bd09"}},
         "sinks":{
           "upload":{"type":"http","inputs":["baidu"],"url":"http://127.0.0.1:\(port)/api/track",
             "batch":{"max_positions":20,"interval":"1s"},
             "body":{"format":"template","template":{"vipId":"${VIP_ID:-vip-7}","list":"$positions"},
                     "fields":{"id":"id","date":{"from":"time","time_format":"yyyy-MM-dd HH:mm:ss","zone":"Asia/Shanghai"},"latitude":"lat","longitude":"lon"}},
             "success":{"json":{"path":"resultInteger","greater_than":0}},
             "queue":{"path":"upload.sqlite"}},
           "copy":{"type":"file","inputs":["baidu"],"path":"sent.jsonl"}}}
        """.utf8).write(to: dir.appendingPathComponent("pipeline.json"))
        let run = try LocgateBinary.run(["run", dir.appendingPathComponent("pipeline.json").path])
        #expect(run.status == 0, "\(run.stderr)")

        // Every request body is the classic payload.
        let requests = try String(contentsOf: received, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        var uploaded: [[String: Any]] = []
        for r in requests {
            #expect(r["status"] as? Int == 200)
            let body = try #require(try JSONSerialization.jsonObject(with: Data((r["body"] as? String ?? "").utf8)) as? [String: Any])
            #expect(body["vipId"] as? String == "vip-7")
            let list = try #require(body["list"] as? [[String: Any]])
            #expect(list.count <= 20)
            uploaded += list
        }
        let seconds = uploaded.compactMap { ($0["id"] as? String)?.split(separator: "-").last.flatMap { Int($0) } }.map { $0 / 1000 - Drive.t0 }
        #expect(seconds.count == uploaded.count)
        #expect(seconds == seconds.sorted() && Set(seconds).count == seconds.count)

        // Parked: the first fix and then one heartbeat every 30 s, nothing else.
        #expect(seconds.filter { $0 < 120 } == [0, 30, 60, 90])
        // Driving inside the park: every second fix (12 m apart) until the east edge at 500 m.
        let driving = seconds.filter { $0 >= 120 }
        #expect(!driving.isEmpty)
        #expect(driving.allSatisfy { Double($0 - 119) * 6 <= 500 })
        #expect(driving.count >= 40)
        for (a, b) in zip(driving, driving.dropFirst()) { #expect(b - a == 2) }

        for (s, u) in zip(seconds, uploaded) {
            // BD-09, as Baidu's map wants it, converted from the fix of that second.
            let expected = ChinaDatums.wgs84ToBD09(Drive.position(at: s))
            let lat = try #require(u["latitude"] as? Double), lon = try #require(u["longitude"] as? Double)
            #expect(abs(lat - expected.latitude) < 1e-6 && abs(lon - expected.longitude) < 1e-6)
            // Local time in Shanghai (UTC+8) on the server's clock format.
            let t = Drive.t0 + s + 8 * 3600
            #expect(u["date"] as? String == String(format: "2024-05-01 %02d:%02d:%02d", (t / 3600) % 24, (t / 60) % 60, t % 60))
        }

        // What was sent is what the file copy saw, and the queue is empty: everything was acknowledged.
        let copy = try String(contentsOf: dir.appendingPathComponent("sent.jsonl"), encoding: .utf8).split(separator: "\n")
        #expect(copy.count == uploaded.count)
        #expect(copy.allSatisfy { $0.contains(#""datum":"bd09""#) })
        let pending = try Program.run("/usr/bin/env", ["sqlite3", dir.appendingPathComponent("upload.sqlite").path, "SELECT count(*) FROM pending;"])
        #expect(pending.status == 0, "\(pending.stderr)")
        #expect(pending.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }
}
