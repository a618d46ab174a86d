import Foundation
import PusherProtocol
import Testing

@Suite struct JSONStringTests {
    @Test(arguments: ["", "plain", "a\"b\\c", "line\nfeed\r\ttab", "\u{1}\u{1f}", "Zürich ☃ 株価 😀", "</script>"])
    func quotedTextParsesBackToTheSameString(_ text: String) throws {
        let quoted = JSONString.quoted(text)
        let parsed = try JSONSerialization.jsonObject(with: Data(quoted.utf8), options: [.fragmentsAllowed]) as? String
        #expect(parsed == text)
        var bytes: [UInt8] = []
        JSONString.append(text, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == quoted)
    }

    /// The escaped runs are copied whole: escapes at the start, the end and side by side, a
    /// substring, and output that already holds bytes all give what a byte-by-byte escape gives.
    @Test func runsAndEscapesAppendLikeAByteByByteEscape() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = ["a", "b", "\"", "\\", "\n", "\u{1}", "é", "☃", " ", "/"]
        var cases = ["\"", "\"\"", "\"abc", "abc\"", "a\"\\\nb", String(repeating: "x", count: 9000) + "\""]
        for _ in 0..<200 {
            cases.append(String((0..<Int.random(in: 0...40, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }))
        }
        for text in cases {
            var bytes: [UInt8] = Array("prefix".utf8)
            JSONString.append(text, to: &bytes)
            #expect(bytes == Array("prefix".utf8) + reference(text), "\(text.debugDescription)")
            var fromSubstring: [UInt8] = []
            JSONString.append(("<" + text + ">").dropFirst().dropLast(), to: &fromSubstring)
            #expect(fromSubstring == reference(text))
        }
    }

    private func reference(_ text: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
            case 0x0A: out += Array("\\n".utf8)
            case 0x0D: out += Array("\\r".utf8)
            case 0x09: out += Array("\\t".utf8)
            case 0..<0x20: out += Array(String(format: "\\u%04x", Int(byte)).utf8)
            default: out.append(byte)
            }
        }
        return out + [UInt8(ascii: "\"")]
    }

    @Test func escapesExactly() {
        #expect(JSONString.quoted("a\"b\\c\n\u{1}") == #""a\"b\\c\n\u0001""#)
        #expect(JSONString.quoted("é/") == "\"é/\"")
    }
}

@Suite struct JSONHexTests {
    @Test func hex4ReadsFourDigitsOrNothing() {
        #expect(JSONString.hex4(Array("00e9".utf8), at: 0) == 0xE9)
        #expect(JSONString.hex4(Array("xD83D".utf8), at: 1) == 0xD83D)
        #expect(JSONString.hex4(Array("00e".utf8), at: 0) == nil)
        #expect(JSONString.hex4(Array("00g9".utf8), at: 0) == nil)
        #expect(JSONString.hex4(Array("0000".utf8), at: 1) == nil)
    }
}

@Suite struct JSONNumberTests {
    @Test(arguments: ["0", "-0", "7", "-12", "10", "1.5", "0.25", "-0.0", "1e3", "1E+3", "2.5e-10", "123456789012345678901234"])
    func validNumbersAreReadWhole(_ text: String) throws {
        #expect(JSONNumber.isValid(text))
        // Every number we accept is one Foundation's strict reader accepts too.
        #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) is NSNumber)
    }

    @Test(arguments: [
        "", "-", "02", "-01", "+1", ".5", "1.", "1.e3", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity", "--1", "1.2.3", " 1",
    ])
    func invalidNumbersAreRefused(_ text: String) {
        #expect(!JSONNumber.isValid(text))
    }

    @Test func theEndIsJustPastTheNumber() {
        let bytes = Array(#"[12,0.5e2}02"#.utf8)
        #expect(JSONNumber.end(in: bytes, from: 1) == 3)
        #expect(JSONNumber.end(in: bytes, from: 4) == 9)
        #expect(JSONNumber.end(in: bytes, from: 10) == 11)  // "0", then the caller sees "2"
        #expect(JSONNumber.end(in: bytes, from: 0) == nil)
    }
}
