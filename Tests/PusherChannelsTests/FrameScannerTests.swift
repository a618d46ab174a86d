import PusherProtocol
import Testing

@testable import PusherChannels

/// The client's frame scanner as a view of `PusherProtocol.JSONTokenizer`: raw values are checked
/// to the last byte, strings follow the one UTF-8 and escape policy, the nesting limit is shared.
@Suite struct FrameScannerTests {
    /// Counting brackets let `{"a":{]}` through as raw `data`; the tokenizer refuses it.
    @Test(arguments: [
        #"{"a":{]}"#, #"{"event":"x","data":{"a":{]}}"#, #"{"event":"x","data":[1,]}"#, #"{"event":"x","data":{"a" 1}}"#,
        #"{"event":"x","data":{"k":"\q"}}"#, #"{"event":"x","data":["\udc00"]}"#, #"{"event":"x","extra":[tru]}"#,
    ])
    func rawValuesAreCheckedNotBracketCounted(_ text: String) {
        #expect(throws: JSONScanner.Failure.self) { try JSONScanner.objectMembers(of: text) }
        #expect(throws: PusherFrameError.self) { try PusherFrame.parse(text) }
    }

    @Test func rawDataIsTheExactSourceText() throws {
        let frame = try PusherFrame.parse(#"{"event":"e","data": {"k" : [1, 2.5e3, {"s":"]}\""}]} , "channel":"c"}"#)
        #expect(frame.data == #"{"k" : [1, 2.5e3, {"s":"]}\""}]}"#)
        #expect(frame.channel == "c")
    }

    @Test func rawControlCharactersInStringsAreRefused() {
        #expect(throws: PusherFrameError.self) { try PusherFrame.parse("{\"event\":\"a\u{1}b\"}") }
        #expect(throws: PusherFrameError.self) { try PusherFrame.parse("{\"event\":\"x\",\"data\":{\"k\":\"\n\"}}") }
    }

    @Test func framesShareTheNestingLimit() throws {
        let limit = JSONTokenizer.maximumDepth
        func frame(dataDepth: Int) -> String {
            #"{"event":"x","data":"# + String(repeating: "[", count: dataDepth) + String(repeating: "]", count: dataDepth) + "}"
        }
        // The frame's own object is one level: data may be `limit - 1` deep.
        #expect(try PusherFrame.parse(frame(dataDepth: limit - 1)).data?.utf8.count == 2 * (limit - 1))
        #expect(throws: PusherFrameError.self) { try PusherFrame.parse(frame(dataDepth: limit)) }
        #expect(throws: PusherFrameError.self) { try PusherFrame.parse(frame(dataDepth: 200_000)) }
    }

    @Test func shapeErrorsSayWhere() {
        #expect(throws: JSONScanner.Failure(message: "expected '{'", offset: 1)) { try JSONScanner.objectMembers(of: " []") }
        #expect(throws: JSONScanner.Failure(message: "expected '['", offset: 0)) { try JSONScanner.arrayElements(of: "{}") }
        #expect(throws: JSONScanner.Failure(message: "unexpected data after the value", offset: 3)) {
            try JSONScanner.objectMembers(of: "{} {}")
        }
    }

    @Test func valuesOfEveryKind() throws {
        let members = try JSONScanner.objectMembers(of: #"{"s":"a\u00e9","n":null,"i":-1.5,"t":true,"o":{},"a":[ ]}"#)
        #expect(members.map(\.key) == ["s", "n", "i", "t", "o", "a"])
        #expect(members.map(\.value) == [.string("aé"), .null, .raw("-1.5"), .raw("true"), .raw("{}"), .raw("[ ]")])
        #expect(try JSONScanner.arrayElements(of: #"["x",2,null]"#) == [.string("x"), .raw("2"), .null])
        #expect(try JSONScanner.document(Array(#" "x" "#.utf8)) == .string("x"))
        #expect(throws: JSONScanner.Failure.self) { try JSONScanner.document([0x22, 0xC0, 0xAF, 0x22]) }
    }
}
