import Synchronization

/// Short tokens unique to this process run and call, for ids of positions that have no time.
///
/// A fix's id is normally derived from its source and time, so a replay reproduces it. A fix
/// without a time can only be numbered, and a number restarts with every decoder (a reconnect, a
/// restarted program, a restarted process): the token keeps such ids from repeating, so a server
/// that drops duplicates by id never drops a real fix.
public enum RunToken {
    private static let process: String = {
        let v = UInt32.random(in: 0...UInt32.max)
        let s = String(v, radix: 36)
        return String(repeating: "0", count: max(0, 7 - s.count)) + s
    }()
    private static let counter = Atomic<Int>(0)

    /// A new token: the process's random part and a per-process sequence number, e.g. `k3x9q0a.2`.
    public static func next() -> String {
        "\(process).\(counter.add(1, ordering: .relaxed).newValue)"
    }
}
