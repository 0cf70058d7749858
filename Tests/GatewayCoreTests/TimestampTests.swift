import Testing
@testable import GatewayCore

@Suite struct TimestampTests {
    @Test func civilRoundTripCoversLeapYearsAndEpoch() {
        for days in stride(from: -800_000, through: 800_000, by: 997) {
            let c = Timestamp.civilFromDays(days)
            #expect(Timestamp.daysFromCivil(year: c.year, month: c.month, day: c.day) == days)
        }
        #expect(Timestamp.daysFromCivil(year: 1970, month: 1, day: 1) == 0)
        #expect(Timestamp.daysFromCivil(year: 2000, month: 3, day: 1) == 11_017)
    }

    @Test(arguments: [
        ("2020-03-18T13:28:20.600Z", Int64(1_584_538_100_600)),
        ("2020-03-18T13:28:20.6Z", Int64(1_584_538_100_600)),
        ("2020-03-18T21:28:20.6+08:00", Int64(1_584_538_100_600)),
        ("2020-03-18 13:28:20Z", Int64(1_584_538_100_000)),
        ("1970-01-01T00:00:00Z", Int64(0)),
    ])
    func parsesISO8601(text: String, ms: Int64) {
        #expect(Timestamp(iso8601: text)?.milliseconds == ms)
    }

    @Test func formatsWithMillisecondsAndZ() {
        #expect(Timestamp(milliseconds: 1_584_538_100_600).iso8601 == "2020-03-18T13:28:20.600Z")
        #expect(Timestamp(milliseconds: 0).iso8601 == "1970-01-01T00:00:00.000Z")
    }

    @Test(arguments: ["", "2020-13-01T00:00:00Z", "2020-03-18", "2020-03-18T13:28:20.Z", "2020-03-18T13:28:20Zjunk"])
    func rejectsMalformedText(text: String) {
        #expect(Timestamp(iso8601: text) == nil)
    }
}
