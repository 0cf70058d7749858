// The `file` source reading a GPX track (format "gpx"): the tolerant GPX scanner and the
// positions it makes. The input is the document, whole (a GPX file is parsed whole); it goes
// through the public PositionFileReader, as `locgate map` and the replay read it.
import FileInput
import FuzzSupport
import GatewayCore

let file = MemoryFile(name: "fuzz.gpx")
let context = ComponentContext.fuzz(id: "track", kind: .source)

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    file.write(fuzzInput(data, size))
    var configuration = FileReplayConfiguration(path: file.path)
    configuration.format = .gpx
    configuration.device = "logger"
    do {
        var reader = try PositionFileReader(configuration: configuration, context: context, idPrefix: "gpx-")
        while let batch = try reader.next() {
            PositionChecks.check(batch, "gpx")
            for position in batch { fuzzCheck(!position.id.isEmpty, "gpx: a position without an id") }
        }
    } catch {
        fatalError("invariant violated: gpx: the reader threw on a readable file: \(error)")
    }
    return 0
}

FuzzDriver.run(testOneInput)
