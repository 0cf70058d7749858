// One MQTT message as the `mqtt` source decodes it: size cap, JSON, OwnTracks or locgate's
// position JSON, the device from the topic through a device template.
//
// Input: [control] template "\n" topic "\n" payload. Control bits 0–1 pick the format (json,
// owntracks, auto, auto), bit 2 a 64-byte `max_message_bytes`; an empty or invalid template
// line means the default (the topic's last two levels), as a configuration would leave it.
import FuzzSupport
import GatewayCore
import MQTTInput

let formats: [MQTTSourceConfiguration.Format] = [.json, .owntracks, .auto, .auto]

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    guard let control = input.first else { return 0 }
    let parts = input.dropFirst().split(separator: 10, maxSplits: 2, omittingEmptySubsequences: false)
    let template = parts.count > 0 ? String(decoding: parts[0], as: UTF8.self) : ""
    let topic = parts.count > 1 ? String(decoding: parts[1], as: UTF8.self) : ""
    let payload = parts.count > 2 ? Array(parts[2]) : []
    let device = template.isEmpty ? nil : MQTTDeviceTemplate.compile(template).template
    let decoder = MQTTMessageDecoder(format: formats[Int(control & 3)], device: device,
                                     maxBytes: control & 4 != 0 ? 64 : 65_536, sourceID: "phones")
    switch decoder.decode(topic: topic, payload: payload, sequence: UInt64(control)) {
    case .position(let position):
        fuzzCheck(position.hasCoordinates, "mqtt: a position without coordinates")
        fuzzCheck(!position.id.isEmpty, "mqtt: a position without an id")
        PositionChecks.check([position], "mqtt")
    case .skipped(let counter, let detail):
        fuzzCheck(counter.hasPrefix("mqtt.skipped.") && !detail.isEmpty, "mqtt: skipped as \(counter): \(detail)")
    }
    return 0
}

FuzzDriver.run(testOneInput)
