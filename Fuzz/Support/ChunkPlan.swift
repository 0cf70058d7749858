/// How a target cuts its input into the reads a device or socket would deliver.
///
/// Decoders must give the same result for any split of the same bytes (STYLE.md: one byte at a
/// time, random chunks, all at once), so the split is part of the input: its first byte picks
/// the plan and the rest is the stream. libFuzzer mutates the plan like any other byte, and a
/// crash file replays with the exact split that caused it.
///
/// | first byte & 3 | reads |
/// |---|---|
/// | 0 | the whole stream at once |
/// | 1 | one byte at a time |
/// | 2 | `(first byte >> 2) + 1` bytes each (1…64) |
/// | 3 | sizes 1…97 from a generator seeded by the first byte |
///
/// The seed corpora start every file with `00` (the whole stream).
public struct ChunkPlan: Sendable, Hashable {
    /// The control byte the plan came from.
    public let control: UInt8

    /// The plan a control byte stands for.
    public init(control: UInt8) { self.control = control }

    /// Splits an input into its plan (the first byte) and the stream (the rest). An empty input
    /// is an empty stream read whole.
    public static func split(_ input: UnsafeRawBufferPointer) -> (plan: ChunkPlan, stream: UnsafeRawBufferPointer) {
        guard let first = input.first else { return (ChunkPlan(control: 0), input) }
        return (ChunkPlan(control: first), UnsafeRawBufferPointer(rebasing: input[1...]))
    }

    /// The reads of a stream of `count` bytes, in order; together they cover `0..<count` exactly.
    public func ranges(count: Int) -> [Range<Int>] {
        guard count > 0 else { return [] }
        var out: [Range<Int>] = []
        var start = 0
        // xorshift32: any seed but 0 cycles through every non-zero state.
        var state = UInt32(control) | 0x9E37_0000
        while start < count {
            let size: Int
            switch control & 3 {
            case 0: size = count
            case 1: size = 1
            case 2: size = Int(control >> 2) + 1
            default:
                state ^= state << 13
                state ^= state >> 17
                state ^= state << 5
                size = Int(state % 97) + 1
            }
            let end = min(count, start + size)
            out.append(start..<end)
            start = end
        }
        return out
    }
}
