import Testing
@testable import TrackerProtocols

@Suite struct ChecksumTests {
    @Test func placeholder() {}
}
