import GatewayCore
import Locking

/// A source output that keeps every batch and holds its end-to-end acknowledgement until the
/// test releases it: what a source that answers devices or a broker only after the commit is
/// tested against.
public final class HeldAcknowledgements: Sendable {
    private let state = Locked<(batches: [[Position]], acks: [BatchAcknowledgement])>(([], []))

    public init() {}

    /// The output to run a source with.
    public var output: SourceOutput {
        SourceOutput(tracking: { [self] batch, ack in
            ack?.retain()
            state.withLock { s in
                s.batches.append(batch)
                if let ack { s.acks.append(ack) }
            }
        })
    }

    /// Every position emitted so far, in order.
    public var positions: [Position] { state.withLock { $0.batches.flatMap { $0 } } }
    /// Batches emitted so far.
    public var batches: Int { state.withLock { $0.batches.count } }
    /// Acknowledgements held.
    public var held: Int { state.withLock { $0.acks.count } }

    /// Releases the acknowledgements held, oldest first (or only the one at `index`).
    public func acknowledge(only index: Int? = nil) {
        let acks: [BatchAcknowledgement] = state.withLock { s in
            if let index {
                guard index < s.acks.count else { return [] }
                return [s.acks.remove(at: index)]
            }
            defer { s.acks.removeAll() }
            return s.acks
        }
        for a in acks { a.release() }
    }
}

/// Bytes from a hex text (`"78780d01"`), as protocol test vectors are written.
public func bytes(hex text: String) -> [UInt8] {
    let chars = Array(text.utf8).filter { $0 != UInt8(ascii: " ") }
    return stride(from: 0, to: chars.count - 1, by: 2).map { UInt8(String(decoding: chars[$0...$0 + 1], as: UTF8.self), radix: 16) ?? 0 }
}
