@testable import MQTTInput
import Testing

@Suite struct DeviceTemplateTests {
    @Test func levelsCountFromEitherEndAndTextIsKept() throws {
        let t = try #require(MQTTDeviceTemplate.compile("fleet-{2}:{-1}").template)
        #expect(t.render(topic: "owntracks/alice/phone") == "fleet-alice:phone")
        #expect(t.render(topic: "one") == "fleet-:one", "a level the topic does not have is empty")
        #expect(MQTTDeviceTemplate.lastTwoLevels.render(topic: "owntracks/alice/phone") == "alice/phone")
    }

    @Test(arguments: [
        ("{x}/{-1}", "unknown placeholder {x} (use {1}, {2} … for topic levels from the start, {-1}, {-2} … from the end)"),
        ("{0}", "unknown placeholder {0} (use {1}, {2} … for topic levels from the start, {-1}, {-2} … from the end)"),
        ("dev/{-1", #"unterminated { in "dev/{-1""#),
        ("fixed", "has no topic level placeholder: every message would get the same device (use {-1} for the last level)"),
        ("", "must not be empty"),
    ])
    func badTemplatesSayWhy(template: String, problem: String) {
        let (compiled, problems) = MQTTDeviceTemplate.compile(template)
        #expect(compiled == nil)
        #expect(problems == [problem])
    }
}
