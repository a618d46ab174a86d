/// Escaping of placeholder values so that each stays inside one topic level (docs/contract.md §5.1):
/// `%`, `/`, `+`, `#` and control characters (U+0000–U+001F, U+007F) are percent-encoded with
/// upper-case hex (`a/b` → `a%2Fb`). Everything else, including non-ASCII UTF-8, passes through,
/// so a level can be decoded back exactly with ``unescape(_:)``.
public enum TopicLevelEscaping {
    /// Whether `byte` must be percent-encoded inside a topic level.
    @inlinable
    public static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "/")
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "#")
    }

    /// `value` escaped for use as (part of) one topic level.
    public static func escape(_ value: some StringProtocol) -> String {
        var output = ""
        append(value, to: &output)
        return output
    }

    /// Appends `value`, escaped, to `output`. No allocation beyond `output`'s growth when nothing
    /// needs escaping (the common case: one append of the whole value).
    public static func append(_ value: some StringProtocol, to output: inout String) {
        let utf8 = value.utf8
        guard utf8.contains(where: needsEscape) else {
            output += value
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count + 16)
        for byte in utf8 {
            if needsEscape(byte) {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hexDigit(byte >> 4))
                bytes.append(hexDigit(byte & 0x0F))
            } else {
                bytes.append(byte)
            }
        }
        output += String(decoding: bytes, as: UTF8.self)
    }

    /// Decodes `%XX` sequences; `nil` when a `%` is not followed by two hex digits or the result is
    /// not UTF-8. Inverse of ``escape(_:)``.
    public static func unescape(_ level: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(level.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    @inlinable
    static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
