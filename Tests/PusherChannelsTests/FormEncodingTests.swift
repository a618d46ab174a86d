import Testing

@testable import PusherChannels

@Suite("Form encoding")
struct FormEncodingTests {
    /// A socket id and a private channel name: dots, dashes and digits stay as they are.
    @Test func authBodyKeepsUnreservedCharacters() {
        let request = PusherAuthRequest(socketID: "123.456", channelName: "private-room_1")
        #expect(request.formBody == "socket_id=123.456&channel_name=private-room_1")
    }

    /// Characters Pusher allows in channel names but a form body reserves are percent-encoded,
    /// upper-case hex, one `%XX` per UTF-8 byte.
    @Test func reservedAndNonASCIIBytesArePercentEncoded() {
        #expect(PusherAuthRequest.formEncode("presence-a=b@c,d;e") == "presence-a%3Db%40c%2Cd%3Be")
        #expect(PusherAuthRequest.formEncode("a b+c&d/e?f%g") == "a%20b%2Bc%26d%2Fe%3Ff%25g")
        #expect(PusherAuthRequest.formEncode("é*~") == "%C3%A9*%7E")
        #expect(PusherAuthRequest.formEncode("") == "")
    }

    /// Control bytes and the full byte range of a multi-byte character encode without loss.
    @Test func controlAndFourByteCharacters() {
        #expect(PusherAuthRequest.formEncode("\n\u{0}") == "%0A%00")
        #expect(PusherAuthRequest.formEncode("🙂") == "%F0%9F%99%82")
    }
}
