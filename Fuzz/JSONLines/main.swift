// The `file` source reading JSON Lines (format "jsonl", what the `file` sink writes): lines
// capped at 1 MiB, each parsed and decoded as a position, bad lines counted and skipped. The
// input is the file, through the public PositionFileReader. Every other pass gets a pass
// number, so the ids of a looped replay are built too.
import FileInput
import FuzzSupport
import GatewayCore

let file = MemoryFile(name: "fuzz.jsonl")
let context = ComponentContext.fuzz(id: "replay", kind: .source)

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    file.write(input)
    var configuration = FileReplayConfiguration(path: file.path)
    configuration.format = .jsonl
    configuration.device = input.count % 2 == 0 ? nil : "logger"
    do {
        var reader = try PositionFileReader(configuration: configuration, context: context, idPrefix: "jsonl-", pass: input.count % 3)
        while let batch = try reader.next() {
            PositionChecks.check(batch, "jsonl")
            for position in batch { fuzzCheck(!position.id.isEmpty, "jsonl: a position without an id") }
        }
    } catch {
        fatalError("invariant violated: jsonl: the reader threw on a readable file: \(error)")
    }
    return 0
}

FuzzDriver.run(testOneInput)
