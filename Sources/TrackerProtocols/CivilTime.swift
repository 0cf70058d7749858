import GatewayCore

/// A civil time the device sent, checked field by field before it becomes a ``Timestamp``.
struct CivilTime {
    var year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int

    /// The instant, or nil when a field is out of range (month 0, day 32, hour 24, ...).
    var timestamp: Timestamp? {
        guard (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour),
            (0...59).contains(minute), (0...59).contains(second), (1970...2099).contains(year)
        else { return nil }
        guard day <= CivilTime.daysIn(month: month, year: year) else { return nil }
        return Timestamp(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
