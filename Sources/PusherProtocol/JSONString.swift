/// JSON string literals, written one way for the whole project: frames the client and the server
/// send, the bridge's payloads and dead letters, log lines.
///
/// `"` and `\` are escaped, as are control characters (`\n`, `\r`, `\t`, else `\u00XX` in lower-case
/// hex); everything else, non-ASCII included, is copied as UTF-8.
public enum JSONString {
    /// Appends `value` as a JSON string literal, quotes included.
    public static func append(_ value: some StringProtocol, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
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
        output.append(UInt8(ascii: "\""))
    }

    /// `value` as a JSON string literal, quotes included.
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

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
