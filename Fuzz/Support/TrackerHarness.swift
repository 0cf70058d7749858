import GatewayCore
import TrackerProtocols

/// Drives a ``TrackerCodec`` the way the listening layer does (DeviceIntake's `DeviceConnection`
/// for streams, `DatagramListener` for datagrams) and checks the protocol's contract.
public enum TrackerHarness {
    /// The reason words ``TrackerFrameError`` documents (metric labels: a new one is a new series).
    static let reasons: Set<String> = ["checksum", "length", "too_large", "syntax", "stop_bytes", "unsupported"]

    /// A stream codec over one connection: the input's plan cuts it into reads, each appended to
    /// what the connection holds, which is decoded until `.needMore`.
    ///
    /// Checks: every `consumed` is at least 1 and at most what was there; after `.needMore` the
    /// connection holds no more than one frame's worth plus the last read (a codec that keeps
    /// asking for more would make it buffer without bound); reason words are the documented ones;
    /// positions pass ``PositionChecks``; and the messages are the same as when the stream
    /// arrives in one read (``TrackerCodec``: any split gives the same messages).
    public static func stream<Codec: TrackerCodec>(
        _ name: String, input: UnsafeRawBufferPointer, maxFrameBytes: Int, makeCodec: () -> Codec
    ) {
        let (plan, stream) = ChunkPlan.split(input)
        let chunked = messages(name, stream, reads: plan.ranges(count: stream.count), maxFrameBytes: maxFrameBytes, codec: makeCodec())
        guard plan.control & 3 != 0 else { return }
        let whole = messages(name, stream, reads: stream.isEmpty ? [] : [0..<stream.count], maxFrameBytes: maxFrameBytes, codec: makeCodec())
        fuzzCheck(chunked == whole, "\(name): reads of plan \(plan.control) gave \(chunked.count) messages, one read \(whole.count): \(firstDifference(chunked, whole))")
    }

    /// The messages of one connection, up to the end of the input or a close.
    static func messages<Codec: TrackerCodec>(
        _ name: String, _ stream: UnsafeRawBufferPointer, reads: [Range<Int>], maxFrameBytes: Int, codec initial: Codec
    ) -> [TrackerMessage] {
        var codec = initial
        var pending: [UInt8] = []
        var out: [TrackerMessage] = []
        for read in reads {
            pending.append(contentsOf: stream[read])
            var used = 0
            var closed = false
            pending.withUnsafeBytes { held in
                while used < held.count {
                    let rest = UnsafeRawBufferPointer(rebasing: held[used...])
                    switch codec.decode(rest, now: FixedClock.instant) {
                    case .needMore:
                        fuzzCheck(rest.count <= maxFrameBytes + read.count,
                                  "\(name): holds \(rest.count) bytes waiting for more (max frame \(maxFrameBytes), last read \(read.count))")
                        return
                    case .message(let message, let consumed):
                        fuzzCheck(consumed >= 1 && consumed <= rest.count, "\(name): message consumed \(consumed) of \(rest.count)")
                        check(message, name)
                        answer(message, codec: &codec, name)
                        out.append(message)
                        used += consumed
                    case .invalid(let error, let consumed, let close):
                        fuzzCheck(consumed >= 1 && consumed <= rest.count, "\(name): invalid consumed \(consumed) of \(rest.count)")
                        fuzzCheck(reasons.contains(error.reason), "\(name): undocumented reason \(error.reason)")
                        _ = error.description
                        used += consumed
                        if close {
                            closed = true
                            return
                        }
                    }
                }
            }
            // A close drops the connection and what it held: nothing after it is decoded.
            if closed { return out }
            pending.removeFirst(used)
        }
        // What the codec does when the connection is quiet, a little later and much later (a
        // split message asked for, then expired), then when it ends: every answer goes out.
        for later: Int64 in [0, 2_000, 120_000] {
            let idle = codec.idle(now: Timestamp(milliseconds: FixedClock.instant.milliseconds + later), ending: false)
            for a in idle.answers { fuzzCheck(!codec.outgoing(a).isEmpty, "\(name): an idle answer went out empty") }
            fuzzCheck(idle.counts.allSatisfy { !$0.isEmpty }, "\(name): an empty statistic")
        }
        _ = codec.idle(now: FixedClock.instant, ending: true)
        PositionChecks.check(codec.flush(now: FixedClock.instant), name)
        return out
    }

    /// Sends what a message owes through the codec's ``TrackerCodec/outgoing(_:)`` (and, for an
    /// admission, the answer to every verdict): never an empty write.
    static func answer<Codec: TrackerCodec>(_ message: TrackerMessage, codec: inout Codec, _ name: String) {
        var answers: [[UInt8]] = []
        switch message {
        case .identification(_, let accepted, let refused): answers = [accepted] + (refused.map { [$0] } ?? [])
        case .records(let records): answers = records.answer.map { [$0] } ?? []
        case .control(_, _, let answer), .commandReply(_, _, _, let answer): answers = answer.map { [$0] } ?? []
        case .admission(let admission):
            let verdicts: [TrackerAdmissionVerdict] = [
                .registered(code: "0123456789ABCDEF"), .authenticated, .deregistered, .refused(.unknownDevice),
                .refused(.alreadyRegistered), .refused(.wrongCode), .refused(.unavailable),
            ]
            answers = verdicts.compactMap { codec.answer(admission, $0) }
        }
        for a in answers { fuzzCheck(!codec.outgoing(a).isEmpty, "\(name): an answer went out empty") }
    }

    /// One datagram per read: the whole datagram is one frame or none.
    public static func datagrams<Codec: TrackerCodec>(_ name: String, input: UnsafeRawBufferPointer, codec initial: Codec) {
        var codec = initial
        let (plan, stream) = ChunkPlan.split(input)
        for read in plan.ranges(count: stream.count) {
            let datagram = UnsafeRawBufferPointer(rebasing: stream[read])
            switch codec.decode(datagram, now: FixedClock.instant) {
            case .needMore:
                break
            case .message(let message, let consumed):
                fuzzCheck(consumed >= 1 && consumed <= datagram.count, "\(name): message consumed \(consumed) of \(datagram.count)")
                check(message, name)
            case .invalid(let error, let consumed, _):
                fuzzCheck(consumed >= 1 && consumed <= datagram.count, "\(name): invalid consumed \(consumed) of \(datagram.count)")
                fuzzCheck(reasons.contains(error.reason), "\(name): undocumented reason \(error.reason)")
                _ = error.description
            }
        }
    }

    static func check(_ message: TrackerMessage, _ name: String) {
        switch message {
        case .identification(let deviceID, let accepted, _):
            fuzzCheck(!deviceID.isEmpty, "\(name): identification without a device id")
            fuzzCheck(!accepted.isEmpty, "\(name): empty acceptance answer")
        case .records(let records):
            if let id = records.deviceID { fuzzCheck(!id.isEmpty, "\(name): records with an empty device id") }
            PositionChecks.check(records.positions, name)
        case .control(let kind, let deviceID, _):
            fuzzCheck(!kind.isEmpty, "\(name): control message without a kind")
            if let id = deviceID { fuzzCheck(!id.isEmpty, "\(name): control with an empty device id") }
        case .admission(let admission):
            fuzzCheck(!admission.deviceID.isEmpty, "\(name): admission without a device id")
            fuzzCheck(!admission.kind.isEmpty, "\(name): admission without a kind")
        case .commandReply(let kind, let deviceID, _, _):
            fuzzCheck(!kind.isEmpty, "\(name): command reply without a kind")
            if let id = deviceID { fuzzCheck(!id.isEmpty, "\(name): command reply with an empty device id") }
        }
    }

    static func firstDifference(_ a: [TrackerMessage], _ b: [TrackerMessage]) -> String {
        for i in 0..<max(a.count, b.count) {
            let x = i < a.count ? "\(a[i])" : "none"
            let y = i < b.count ? "\(b[i])" : "none"
            if x != y { return "message \(i): \(x) vs \(y)" }
        }
        return "none"
    }
}
