/// Reads what ``RecordWriter`` wrote; every read returns `nil` past the end instead of trapping.
struct RecordReader {
    private let input: [UInt8]
    private var offset = 0

    init(_ input: [UInt8]) { self.input = input }

    var isAtEnd: Bool { offset == input.count }

    mutating func version() -> UInt8? {
        guard offset < input.count else { return nil }
        defer { offset += 1 }
        return input[offset]
    }

    mutating func bytes() -> [UInt8]? {
        guard let length = fixedWidth(UInt32.self) else { return nil }
        let count = Int(length)
        guard count <= input.count - offset else { return nil }
        defer { offset += count }
        return Array(input[offset..<offset + count])
    }

    mutating func string() -> String? {
        guard let raw = bytes() else { return nil }
        return String(validating: raw, as: UTF8.self)
    }

    mutating func int() -> Int64? { fixedWidth(Int64.self) }

    private mutating func fixedWidth<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard input.count - offset >= size else { return nil }
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { raw in
            for i in 0..<size { raw[i] = input[offset + i] }
        }
        offset += size
        return T(littleEndian: value)
    }
}
