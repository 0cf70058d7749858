import GatewayCore

/// A track as a device with a flaky link delivers it: some fixes arrive late, behind newer
/// ones (a tracker replaying its buffer after a dead spot, a broker redelivering a message).
public enum LateDelivery {
    /// `track` (one device, in time order, one fix per index) in delivery order with `share` of
    /// its fixes each moved `delay` seconds' worth of fixes later, right behind the fix that many
    /// places newer; and the ids of the moved fixes. The first `keep` fixes are never moved,
    /// so a device's start is on time, and no fix is moved past the end.
    public static func delay(_ track: [Position], share: Double, delay: ClosedRange<Int>, keep: Int = 60, seed: UInt64) -> (delivery: [Position], late: Set<String>) {
        var rng = SeededGenerator(seed: seed)
        let candidates = Array(keep..<max(keep, track.count - delay.upperBound))
        let count = min(candidates.count, Int((Double(track.count) * share).rounded()))
        let moved = Set(candidates.shuffled(using: &rng).prefix(count))
        var behind: [Int: [Position]] = [:]
        for i in moved.sorted() { behind[i + Int.random(in: delay, using: &rng), default: []].append(track[i]) }
        var delivery: [Position] = []
        delivery.reserveCapacity(track.count)
        for (i, p) in track.enumerated() {
            if !moved.contains(i) { delivery.append(p) }
            delivery += behind[i] ?? []
        }
        return (delivery, Set(moved.map { track[$0].id }))
    }
}
