import GatewayCore
import Testing

/// Doubles the latitude of even-numbered positions and drops odd ones, per position only.
private struct DropOdd: PositionTransform {
    mutating func process(_ position: Position, into output: inout [Position]) {
        guard let n = Int(position.id), n % 2 == 0 else { return }
        var p = position
        p.latitude = (p.latitude ?? 0) * 2
        output.append(p)
    }
}

/// Emits every position twice: a transform that is not one-for-one.
private struct Twice: PositionTransform {
    mutating func process(_ position: Position, into output: inout [Position]) {
        output.append(position)
        output.append(position)
    }
}

@Suite struct BatchTransformTests {
    private func batch(_ n: Int) -> [Position] {
        (0..<n).map { Position(latitude: Double($0), longitude: 1, id: "\($0)") }
    }

    @Test func updateAndFilterChangesInPlaceAndKeepsOrder() {
        var b = batch(7)
        b.updateAndFilter { p in
            guard let n = Int(p.id), n % 3 != 0 else { return false }
            p.longitude = Double(n) * 10
            return true
        }
        #expect(b.map(\.id) == ["1", "2", "4", "5"])
        #expect(b.map(\.longitude) == [10, 20, 40, 50])
    }

    @Test func updateAndFilterKeepingNothingOrEverything() {
        var none = batch(4)
        none.updateAndFilter { _ in false }
        #expect(none.isEmpty)
        var all = batch(4)
        all.updateAndFilter { _ in true }
        #expect(all.map(\.id) == ["0", "1", "2", "3"])
    }

    @Test func defaultBatchProcessingIsPerPosition() {
        var t = DropOdd()
        var b = batch(5)
        t.process(batch: &b)
        #expect(b.map(\.id) == ["0", "2", "4"])
        #expect(b.map(\.latitude) == [0, 4, 8])
        var twice = Twice()
        var c = batch(2)
        twice.process(batch: &c)
        #expect(c.map(\.id) == ["0", "0", "1", "1"])
    }

    @Test func batchOfASharedArrayLeavesTheOtherCopyAlone() {
        let original = batch(4)
        var b = original
        b.updateAndFilter { p in p.latitude = -1; return true }
        #expect(original.map(\.latitude) == [0, 1, 2, 3])
        #expect(b.map(\.latitude) == [-1, -1, -1, -1])
    }
}
