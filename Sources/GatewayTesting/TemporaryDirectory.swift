import Foundation

/// A new empty directory under the system's temporary directory; the caller removes it.
public func makeTemporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "locgate-test-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// `makeTemporaryDirectory()` as a file URL.
public func makeTemporaryDirectoryURL() throws -> URL {
    URL(fileURLWithPath: try makeTemporaryDirectory(), isDirectory: true)
}

/// A new empty directory on the memory filesystem `/dev/shm` when there is one (else as
/// `makeTemporaryDirectory()`): for tests that commit thousands of times and do not measure the
/// disk, whose every fsync would otherwise wait for it. The caller removes it.
public func makeMemoryTemporaryDirectory() throws -> String {
    guard access("/dev/shm", W_OK) == 0 else { return try makeTemporaryDirectory() }
    let path = "/dev/shm/locgate-test-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
