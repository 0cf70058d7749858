import Foundation
import GatewayTesting
import Testing

/// A queue on a full disk is refused at start with a clear message (exit 1), not discovered later.
@Suite(.timeLimit(.minutes(3)), .serialized, .enabled(if: Tmpfs.canMount, "needs root to mount a small tmpfs"))
struct QueueDiskTests {
    @Test func aFullDiskUnderTheQueueIsAClearErrorAtStart() throws {
        let dir = try makeTemporaryDirectoryURL()
        let disk = dir.appendingPathComponent("disk").path
        #expect(Tmpfs.sh("mkdir -p '\(disk)' && mount -t tmpfs -o size=256k tmpfs '\(disk)' && dd if=/dev/zero of='\(disk)/fill' bs=1k count=300") != -1)
        defer { _ = Tmpfs.sh("umount '\(disk)'") }
        try Data(#"{"sources":{"r":{"type":"file","path":"x.nmea"}},"sinks":{"u":{"type":"http","inputs":["r"],"url":"http://127.0.0.1:9/x","queue":{"path":"disk/q.sqlite"}}}}"#.utf8)
            .write(to: dir.appendingPathComponent("p.json"))
        try Data().write(to: dir.appendingPathComponent("x.nmea"))
        let r = try LocgateBinary.run(["run", dir.appendingPathComponent("p.json").path])
        #expect(r.status == 1)
        #expect(r.stderr.contains("sinks.u: cannot start: queue \(disk)/q.sqlite: disk full"), "\(r.stderr)")
    }
}
