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
