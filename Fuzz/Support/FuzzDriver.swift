import CLibFuzzer

#if canImport(Glibc)
import Glibc
#endif

/// Starts libFuzzer for a target's `LLVMFuzzerTestOneInput`.
///
/// SwiftPM links an executable target's top-level code as the program's `main`, so libFuzzer's
/// own `main` never runs; the target's top-level code calls ``run(_:)`` instead, which hands
/// the command line (corpus directories, `-runs=`, a crash file to reproduce…) to libFuzzer.
public enum FuzzDriver {
    /// Runs libFuzzer with `testOneInput` as the target and exits with its status.
    public static func run(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
    }
}

/// The input libFuzzer passed, as bytes (an empty input may come with a nil pointer).
public func fuzzInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> UnsafeRawBufferPointer {
    guard let data, size > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
    return UnsafeRawBufferPointer(start: data, count: size)
}

/// Stops the run with `message` when an invariant does not hold: libFuzzer sees the trap as a
/// crash and writes the input that caused it (`crash-…`), like any other crash.
public func fuzzCheck(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() { fatalError("invariant violated: \(message())", file: file, line: line) }
}
