/// Length-prefixed fields: a version byte, then per field a little-endian UInt32 length and bytes
/// (strings as UTF-8) or a little-endian Int64.
struct RecordWriter {
    private(set) var output: [UInt8] = []

    /// `capacity`: the record's expected size (one allocation when it is right).
    init(version: UInt8, capacity: Int = 128) {
        output.reserveCapacity(capacity)
        output.append(version)
    }

    mutating func bytes(_ value: [UInt8]) {
        length(value.count)
        output.append(contentsOf: value)
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            length(utf8.count)
            output.append(contentsOf: utf8)
        }
    }

    mutating func int(_ value: Int64) {
        let bits = UInt64(bitPattern: value)
        for shift in stride(from: 0, to: 64, by: 8) { output.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    /// A field's length: little-endian UInt32.
    private mutating func length(_ count: Int) {
        let bits = UInt32(truncatingIfNeeded: count)
        for shift in stride(from: 0, to: 32, by: 8) { output.append(UInt8(truncatingIfNeeded: bits >> UInt32(shift))) }
    }
}
