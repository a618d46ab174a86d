/// JSON string literals, written one way for the whole project: frames the client and the server
/// send, the bridge's payloads and dead letters, log lines.
///
/// `"` and `\` are escaped, as are control characters (`\n`, `\r`, `\t`, else `\u00XX` in lower-case
/// hex); everything else, non-ASCII included, is copied as UTF-8.
public enum JSONString {
    /// Appends `value` as a JSON string literal, quotes included.
    ///
    /// `@inlinable` (like ``quoted(_:)``): every event's data goes through here on the bridge's
    /// hot paths, and an unspecialized generic walk over `some StringProtocol` cost more than the
    /// rest of building a `batch_events` body (issue 7 profile).
    @inlinable
    public static func append(_ value: some StringProtocol, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        let copied: Void? = value.utf8.withContiguousStorageIfAvailable { appendEscaped($0, to: &output) }
        if copied == nil {
            for byte in value.utf8 { appendEscaped(byte, to: &output) }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Appends `bytes` escaped: the runs that need no escape are copied whole (a payload is mostly
    /// such a run: one `memcpy`, not an append per byte with its uniqueness check, which was a
    /// fifth of MQTT → Pusher's CPU with 8 KB payloads).
    @inlinable
    static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        var runStart = 0
        for index in 0..<bytes.count {
            let byte = bytes[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            if runStart < index { output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index])) }
            appendEscaped(byte, to: &output)
            runStart = index + 1
        }
        if runStart < bytes.count { output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
    }

    /// Appends one byte, escaped if JSON requires it.
    @inlinable
    static func appendEscaped(_ byte: UInt8, to output: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0..<0x20:
            output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            output.append(hexDigits[Int(byte >> 4)])
            output.append(hexDigits[Int(byte & 0x0F)])
        default: output.append(byte)
        }
    }

    /// `value` as a JSON string literal, quotes included.
    @inlinable
    public static func quoted(_ value: some StringProtocol) -> String {
        // Most names and payloads need no escaping: skip the byte loop for them.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return "\"" + value + "\""
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count + 16)
        append(value, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The value of the four hex digits of a `\uXXXX` escape starting at `index`, or `nil` when
    /// there are fewer than four bytes left or one is not a hex digit (parsers report that error).
    public static func hex4<Bytes: RandomAccessCollection>(_ bytes: Bytes, at index: Int) -> UInt32?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard index >= bytes.startIndex, index + 4 <= bytes.endIndex else { return nil }
        var value: UInt32 = 0
        for b in bytes[index..<index + 4] {
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: return nil
            }
            value = value << 4 | digit
        }
        return value
    }

    @usableFromInline static let hexDigits = Array("0123456789abcdef".utf8)
}
