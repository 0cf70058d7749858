import GatewayCore
import NATSClient
import PositionEncoding

/// Turns NATS messages into positions (locgate JSON, gpsd TPV names), counting what is not one.
package struct MessageDecoder {
    /// What a position needs to be acknowledged, without the message's payload.
    struct Delivery {
        var ackToken: NATSAckToken?
        var deliveries: Int?
        /// The publisher gave the position its id. One made up here (from the device and fix
        /// time, or the stream sequence) can be shared by two distinct positions.
        var idGiven = true
    }

    /// The positions of a batch, each with its dedupe key and its message; `bad`: the messages
    /// that are no position, to terminate.
    package struct Batch {
        package var positions: [Position] = []
        package var keys: [String] = []
        var sources: [Delivery] = []
        package var bad: [NATSAckToken] = []
    }

    let context: ComponentContext
    /// Numbers positions without a time or id within this run (never reused after a restart).
    private let runToken = RunToken.next()
    private var untimed = 0
    private var logged = 0

    /// A decoder for one `nats` source (package-visible for the fuzz target, Fuzz/NATSMessages).
    package init(context: ComponentContext) { self.context = context }

    package mutating func decode(_ messages: [NATSReceivedMessage]) -> Batch {
        var out = Batch()
        out.positions.reserveCapacity(messages.count)
        for m in messages {
            switch position(m) {
            case .success(let (p, idGiven)):
                out.positions.append(p)
                // Ids are unique per publishing source, not across devices of a fleet.
                out.keys.append("\(p.device ?? "")\u{1F}\(p.id)")
                out.sources.append(Delivery(ackToken: m.ackToken, deliveries: m.deliveries, idGiven: idGiven))
            case .failure(let problem):
                context.stats.count(problem.counter)
                logged += 1
                // The first few are worth a look; after that the counters tell the story.
                if logged <= 5 { context.logger.warning("message on \(m.subject)\(m.streamSequence.map { " (stream sequence \($0))" } ?? "") skipped: \(problem.text)") }
                if let t = m.ackToken { out.bad.append(t) }
            }
        }
        return out
    }

    struct Problem: Error {
        var counter: String
        var text: String
    }

    /// The message's position, and whether its id came with it.
    private mutating func position(_ m: NATSReceivedMessage) -> Result<(Position, Bool), Problem> {
        if m.payload.count > NATSPositionSource.maxMessageBytes {
            return .failure(Problem(counter: "nats.too_large", text: "\(m.payload.count) bytes, more than a position (\(NATSPositionSource.maxMessageBytes))"))
        }
        let value: JSONValue
        do {
            value = try m.payload.withUnsafeBytes { try JSONValue.parse($0) }
        } catch {
            return .failure(Problem(counter: "nats.bad_json", text: "\(error)"))
        }
        var p: Position
        do {
            p = try PositionJSON.decode(value, source: context.id) { _ in "" }
        } catch {
            return .failure(Problem(counter: "nats.not_a_position", text: "\(error)"))
        }
        guard p.hasCoordinates else {
            return .failure(Problem(counter: "nats.no_coordinates", text: "no lat/lon"))
        }
        // This component produced it; the id (from the publishing gateway) stays the idempotency key.
        p.source = context.id
        if p.device == nil, let last = m.subject.split(separator: ".").last { p.device = String(last) }
        let idGiven = !p.id.isEmpty
        if !idGiven {
            let device = p.device.map { "\($0)-" } ?? ""
            if let t = p.time {
                p.id = "\(context.id)-\(device)\(t.milliseconds)"
            } else if let stream = m.stream, let seq = m.streamSequence {
                // Stable across redeliveries: the message's place in its stream.
                p.id = "\(context.id)-\(stream)-\(seq)"
            } else {
                untimed += 1
                p.id = "\(context.id)-\(device)n\(runToken)-\(untimed)"
            }
        }
        return .success((p, idGiven))
    }
}
