// OwnTracks messages as the `mqtt` source reads them (format "owntracks"): the JSON text, whole,
// parsed and decoded. A location that decodes is written back in OwnTracks form (what the
// `mqtt` sink publishes) and must decode again to the same place and second.
import FuzzSupport
import GatewayCore
import PositionEncoding

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let value = try? JSONValue.parse(fuzzInput(data, size)) else { return 0 }
    let position: Position
    do throws(OwnTracks.Skip) {
        position = try OwnTracks.decode(value, source: "phones", device: "alice/phone")
    } catch {
        return 0
    }
    PositionChecks.check([position], "owntracks")
    var text: [UInt8] = []
    OwnTracks.append(position, to: &text)
    let again: Position
    do {
        again = try OwnTracks.decode(try JSONValue.parse(text), source: "phones", device: "alice/phone")
    } catch {
        fatalError("invariant violated: owntracks: a written location does not read back (\(error)): \(String(decoding: text, as: UTF8.self))")
    }
    // `tst` is whole seconds: the time reads back rounded down to its second.
    let second = position.time.map { t in (t.milliseconds >= 0 ? t.milliseconds / 1000 : (t.milliseconds - 999) / 1000) * 1000 }
    fuzzCheck(again.time?.milliseconds == second, "owntracks: time \(String(describing: position.time)) read back as \(String(describing: again.time))")
    if let a = again.latitude, let b = position.latitude, let c = again.longitude, let d = position.longitude {
        fuzzCheck(abs(a - b) <= 1e-7 && abs(c - d) <= 1e-7, "owntracks: \(b), \(d) read back as \(a), \(c)")
    }
    return 0
}

FuzzDriver.run(testOneInput)
