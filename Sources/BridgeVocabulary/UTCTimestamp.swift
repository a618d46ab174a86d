/// A point in time as the bridge stamps messages: milliseconds since 1970 UTC. Passed in by the
/// caller (time is data, docs/style.md §2); rendered as RFC 3339 with milliseconds (`received_at`, docs/contract.md §5.1).
public struct UTCTimestamp: Sendable, Hashable, Comparable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    public static func < (lhs: UTCTimestamp, rhs: UTCTimestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// `2026-11-21T21:05:08.123Z`. Uses Howard Hinnant's days-to-civil algorithm (no Foundation, no locale).
    public var rfc3339: String {
        let milliseconds = Int(((millisecondsSince1970 % 1000) + 1000) % 1000)
        let seconds = (millisecondsSince1970 - Int64(milliseconds)) / 1000
        var days = Int(seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400)
        let secondOfDay = Int(seconds - Int64(days) * 86400)
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        func put(_ value: Int, digits: Int) {
            var divisor = 1
            for _ in 1..<digits { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        put(year, digits: 4)
        bytes.append(UInt8(ascii: "-"))
        put(month, digits: 2)
        bytes.append(UInt8(ascii: "-"))
        put(day, digits: 2)
        bytes.append(UInt8(ascii: "T"))
        put(secondOfDay / 3600, digits: 2)
        bytes.append(UInt8(ascii: ":"))
        put(secondOfDay / 60 % 60, digits: 2)
        bytes.append(UInt8(ascii: ":"))
        put(secondOfDay % 60, digits: 2)
        bytes.append(UInt8(ascii: "."))
        put(milliseconds, digits: 3)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
