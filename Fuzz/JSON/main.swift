// The one JSON parser (configs, gpsd reports, exec lines, JSON Lines, queued records, MQTT and
// NATS payloads) and the writer beside it. The input is the JSON text, whole.
//
// Checks: an error names a place inside the text; what parses with duplicate keys rejected
// parses the same with the last one winning; and what parses writes back (`jsonText`) to text
// that parses to the same value (every queue and sink relies on that).
import FuzzSupport
import GatewayCore

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    let lenient: JSONValue?
    do {
        lenient = try JSONValue.parse(input)
    } catch {
        fuzzCheck(error.offset >= 0 && error.offset <= input.count, "json: error offset \(error.offset) of \(input.count)")
        fuzzCheck(error.line >= 1 && error.column >= 1, "json: error at line \(error.line), column \(error.column)")
        _ = error.description
        lenient = nil
    }
    let strict = try? JSONValue.parse(input, duplicateKeys: .reject)
    if let strict {
        fuzzCheck(strict == lenient, "json: rejecting duplicates gave another value than the last one winning")
    }
    guard let value = lenient else { return 0 }
    let text = value.jsonText
    let again: JSONValue
    do { again = try JSONValue.parse(string: text) } catch {
        fatalError("invariant violated: json: written text does not parse (\(error)): \(text)")
    }
    fuzzCheck(again == value, "json: written text reads back as another value: \(text)")
    _ = value.sortingKeys.jsonText
    return 0
}

FuzzDriver.run(testOneInput)
