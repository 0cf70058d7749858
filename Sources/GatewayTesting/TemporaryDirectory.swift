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
