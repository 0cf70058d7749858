import GatewayCore

/// Checks a ``StatefulTransform``'s snapshots against its running state: a transform restarted
/// from the snapshots it saved must continue exactly as one that never stopped.
///
/// `positions` go through one instance without a stop, and through a second that is stopped
/// after each index in `stops`: there every device's changed state is snapshotted (through the
/// JSON text the store keeps), and a fresh instance from `make` restores it and goes on. The two
/// outputs must be equal, position for position (ids, events, attributes). A mismatch names the
/// first difference.
public enum StateRoundTrip {
    public static func check<T: StatefulTransform>(_ make: () -> T, _ positions: [Position], stops: [Int]) -> String? {
        var steady = make()
        var expected: [Position] = []
        for p in positions { steady.process(p, into: &expected) }

        var current = make()
        current.recordStateChanges()
        var saved: [String: JSONValue] = [:]
        var got: [Position] = []
        for (i, p) in positions.enumerated() {
            current.process(p, into: &got)
            for (device, state) in current.takeStateChanges() {
                // Through text, as the store keeps it.
                saved[device] = state.flatMap { try? JSONValue.parse(string: $0.jsonText) }
            }
            guard stops.contains(i) else { continue }
            var restarted = make()
            for (device, state) in saved {
                do { try restarted.restore(device: device, from: state) } catch {
                    return "stop after #\(i): device \(device) not restored from \(state.jsonText): \(error)"
                }
            }
            restarted.recordStateChanges()
            current = restarted
        }
        guard got != expected else { return nil }
        let n = zip(got, expected).prefix { $0 == $1 }.count
        return "outputs differ at #\(n) (after \(got.count) vs \(expected.count) positions): restarted \(n < got.count ? "\(got[n].id) \(got[n].event.map { "\($0)" } ?? "")" : "ended"), steady \(n < expected.count ? "\(expected[n].id) \(expected[n].event.map { "\($0)" } ?? "")" : "ended")"
    }
}
