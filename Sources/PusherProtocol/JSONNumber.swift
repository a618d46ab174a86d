/// The JSON number grammar (RFC 8259 §6), in one place for every parser in the project: the
/// client's frame scanner, pusher-local's parser and the bridge's payload validator.
///
/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` — so no leading zeros (`02`), no `+1`,
/// no `.5`, no `1.`, no `NaN` or `Infinity`.
public enum JSONNumber {
    /// The index just past the number that starts at `start`, or `nil` when no valid number
    /// starts there. What follows the number is the caller's business.
    @inlinable
    public static func end<Bytes: RandomAccessCollection<UInt8>>(in bytes: Bytes, from start: Bytes.Index) -> Bytes.Index? {
        var index = start
        @inline(__always) func digit(_ i: Bytes.Index) -> Bool {
            i < bytes.endIndex && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9")
        }
        @inline(__always) func digits(from i: inout Bytes.Index) -> Bool {
            guard digit(i) else { return false }
            repeat { bytes.formIndex(after: &i) } while digit(i)
            return true
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "-") { bytes.formIndex(after: &index) }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "0") {
            bytes.formIndex(after: &index)
        } else if !digits(from: &index) {
            return nil
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: ".") {
            bytes.formIndex(after: &index)
            guard digits(from: &index) else { return nil }
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            bytes.formIndex(after: &index)
            if index < bytes.endIndex, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                bytes.formIndex(after: &index)
            }
            guard digits(from: &index) else { return nil }
        }
        return index
    }

    /// Whether all of `text` is one JSON number.
    @inlinable
    public static func isValid(_ text: some StringProtocol) -> Bool {
        let utf8 = Array(text.utf8)
        return end(in: utf8, from: 0) == utf8.count
    }
}

/// The JSON literals `true`, `false` and `null`, matched exactly, for the same three parsers.
public enum JSONLiteral {
    /// Whether `bytes` hold `literal` starting at `index` (`false` when they end before it does).
    @inlinable
    public static func matches<Bytes: RandomAccessCollection<UInt8>>(
        _ literal: StaticString, in bytes: Bytes, at index: Bytes.Index
    ) -> Bool where Bytes.Index == Int {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.endIndex else { return false }
        for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] { return false }
        return true
    }
}
