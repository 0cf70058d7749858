// A batch of NATS messages as the `nats` source decodes it: size cap, JSON, locgate's position
// JSON, the device from the subject's last token, ids for positions that carry none.
//
// Input: [control] subject "\n" payloads, the payloads separated by 0x1E (one message each).
// Control bit 0 makes them JetStream messages (stream, sequence, ack token), bit 1 redeliveries.
import FuzzSupport
import GatewayCore
import NATSClient
import NATSInput

let context = ComponentContext.fuzz(id: "fleet", kind: .source)

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    guard let control = input.first else { return 0 }
    let parts = input.dropFirst().split(separator: 10, maxSplits: 1, omittingEmptySubsequences: false)
    let subject = parts.count > 0 ? String(decoding: parts[0], as: UTF8.self) : ""
    let payloads = parts.count > 1 ? parts[1].split(separator: 0x1E, omittingEmptySubsequences: false) : []
    let messages = payloads.enumerated().map { index, payload in
        var message = NATSReceivedMessage(subject: subject, payload: Array(payload))
        if control & 1 != 0 {
            message.stream = "POSITIONS"
            message.streamSequence = UInt64(index + 1)
        }
        if control & 2 != 0 { message.deliveries = 2 }
        return message
    }
    var decoder = MessageDecoder(context: context)
    let batch = decoder.decode(messages)
    fuzzCheck(batch.positions.count <= messages.count, "nats: \(batch.positions.count) positions from \(messages.count) messages")
    fuzzCheck(batch.keys.count == batch.positions.count, "nats: \(batch.keys.count) keys for \(batch.positions.count) positions")
    for position in batch.positions {
        fuzzCheck(position.hasCoordinates && !position.id.isEmpty, "nats: a position without coordinates or id")
    }
    PositionChecks.check(batch.positions, "nats")
    return 0
}

FuzzDriver.run(testOneInput)
