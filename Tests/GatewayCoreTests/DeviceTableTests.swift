import GatewayCore
import Testing

@Suite struct DeviceTableTests {
    @Test func staysBoundedAndForgetsTheLeastRecentlyUpdated() {
        var t = DeviceTable<Int>(capacity: 100)
        for i in 0..<1000 { t["sender-\(i)"] = i }
        #expect(t.count <= 100)
        #expect(t["sender-999"] == 999)
        #expect(t["sender-0"] == nil)
        #expect(t.evicted >= 900)
    }

    @Test func anUpdatedDeviceIsKept() {
        var t = DeviceTable<Int>(capacity: 10)
        t["keep"] = 0
        for i in 0..<50 {
            t["d\(i)"] = i
            t["keep"] = i   // updated as often as others appear
        }
        #expect(t["keep"] == 49)
        #expect(t.count <= 10)
    }
}
