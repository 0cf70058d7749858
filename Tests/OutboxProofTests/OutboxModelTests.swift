import GatewayTesting
import DeliveryEngine
import Testing

/// The outboxes against a model of their contract: seeded random sequences of appends (direct
/// and through `OutboxWriter`), reads, acknowledgements in and out of order, in-flight marks,
/// dead letters, expiry, the record cap, and (SQLite) crashes and clean reopens. The observable
/// state must equal the model's after every step; a failing sequence is shrunk and printed.
@Suite(.serialized) struct OutboxModelTests {
    /// Steps per sequence, and sequences per outbox (times LOCGATE_PROOF_SCALE).
    static let length = 400
    static let sequences = 6

    func check(_ subject: OutboxSubject, seedBase: UInt64) async {
        var steps = 0
        for i in 0..<(Self.sequences * ProofScale.factor) {
            let seed = seedBase + UInt64(i)
            let ops = OutboxModelRunner.generate(seed: seed, count: Self.length, subject: subject)
            steps += ops.count
            if let failure = await OutboxModelRunner.run(ops, subject: subject) {
                let report = await OutboxModelRunner.report(seed: seed, length: ops.count, subject: subject, failure: failure, original: ops)
                Issue.record(Comment(rawValue: report))
                return
            }
        }
        print("model check: \(subject.rawValue) outbox matched its model after each of \(steps) steps (\(Self.sequences * ProofScale.factor) seeded sequences)")
    }

    @Test(.timeLimit(.minutes(ProofScale.minutes))) func theSQLiteOutboxBehavesAsItsModelThroughCrashesAndReopens() async {
        await check(.sqlite, seedBase: 0x5157_0000)
    }

    @Test(.timeLimit(.minutes(ProofScale.minutes))) func theMemoryOutboxBehavesAsItsModel() async {
        await check(.memory, seedBase: 0x4D45_0000)
    }

    /// The check itself: an outbox whose `remove(through:)` takes one record too many fails, and
    /// the sequence is shrunk to the few steps that show it (appends and one such remove).
    @Test(.timeLimit(.minutes(2))) func aPlantedDefectIsFoundAndShrunkToAFewSteps() async throws {
        let ops = OutboxModelRunner.generate(seed: 7, count: Self.length, subject: .offByOne)
        let failure = try #require(await OutboxModelRunner.run(ops, subject: .offByOne))
        let (shrunk, last) = await OutboxModelRunner.shrink(ops, subject: .offByOne)
        #expect(last != nil)
        #expect(shrunk.count <= 4, "\(shrunk)")
        #expect(shrunk.contains { if case .removeThrough = $0 { true } else { false } }, "\(shrunk)")
        let report = await OutboxModelRunner.report(seed: 7, length: ops.count, subject: .offByOne, failure: failure, original: ops)
        #expect(report.contains("minimal failing sequence (\(shrunk.count) steps)"), "\(report)")
    }
}
