import Foundation
import PusherProtocol
import TestSupport
import Testing

@testable import PusherChannels

/// The secretbox and encrypted-channel vectors of Pusher's official signature test vectors,
/// `Tests/Fixtures/pusher-signatures.json`.
struct CryptoVectors: Decodable {
    struct ChannelAuth: Decodable {
        let key: String, secret: String, socket_id: String, channel: String, auth: String
        let encryption_master_key_base64: String?, shared_secret_base64: String?
    }
    struct Secretbox: Decodable {
        let key_hex: String, plaintext: String, nonce_base64: String, ciphertext_base64: String, wire_data: String
    }
    let channel_auth: [ChannelAuth]
    let secretbox: [Secretbox]

    static func load() throws -> CryptoVectors {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/pusher-signatures.json")
        return try JSONDecoder().decode(CryptoVectors.self, from: Data(contentsOf: url))
    }
}

func bytes(hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        out.append(UInt8(hex[index..<next], radix: 16) ?? 0)
        index = next
    }
    return out
}

@Suite struct FrameParsingTests {
    @Test func dataAsAJSONStringIsUnescapedExactly() throws {
        let frame = try PusherFrame.parse(#"{"event":"new-price","channel":"market","data":"{\"p\":1.5,\"s\":\"\\u00e9\\n\"}"}"#)
        #expect(frame == PusherFrame(event: "new-price", channel: "market", data: "{\"p\":1.5,\"s\":\"\\u00e9\\n\"}"))
    }

    @Test func dataAsAnObjectIsKeptAsRawText() throws {
        let frame = try PusherFrame.parse(#"{"event":"pusher:error","data":{"message":"x","code":null}}"#)
        #expect(frame.data == #"{"message":"x","code":null}"#)
        #expect(ProtocolEventData.serverError(from: frame.data) == .serverError(message: "x", code: nil))
        let stringForm = try PusherFrame.parse(#"{"event":"pusher:error","data":"{\"message\":\"y\",\"code\":4009}"}"#)
        #expect(ProtocolEventData.serverError(from: stringForm.data) == .serverError(message: "y", code: 4009))
    }

    @Test func escapesAndUnicodeAreDecoded() throws {
        let frame = try PusherFrame.parse(#"{"event":"e\u00e9\ud83d\ude00","data":"a\"b\\c\/d\te"}"#)
        #expect(frame.event == "eé😀")
        #expect(frame.data == "a\"b\\c/d\te")
    }

    @Test func numericUserIDsAreNormalised() throws {
        #expect(try PusherFrame.parse(#"{"event":"client-x","channel":"presence-a","data":"{}","user_id":1234}"#).userID == "1234")
        #expect(try PusherFrame.parse(#"{"event":"client-x","channel":"presence-a","data":"{}","user_id":"u1"}"#).userID == "u1")
    }

    @Test func unknownFieldsAndMissingDataAreFine() throws {
        let frame = try PusherFrame.parse(#" { "extra" : [1, {"a": "}"}], "event" : "x" } "#)
        #expect(frame == PusherFrame(event: "x"))
    }

    @Test(arguments: [
        "", "[]", "{", #"{"event":1}"#, #"{"data":"x"}"#, #"{"event":"x",}"#, #"{"event":"x"} trailing"#,
        #"{"event":"\ud800"}"#, #"{"event":"x","channel":5}"#, #"{"event":"unterminated}"#,
        #"{"event":"x","user_id":02}"#, #"{"event":"x","user_id":+2}"#, #"{"event":"x","user_id":1.}"#,
        #"{"event":"x","user_id":NaN}"#, #"{"event":"x","extra":tru}"#, #"{"event":"x","extra":nullx}"#,
    ])
    func malformedFramesAreErrorsNotCrashes(text: String) {
        #expect(throws: PusherFrameError.self) { try PusherFrame.parse(text) }
    }

    /// The http-reply fuzz target's find (CI run of issue 7): `{"user_count":02}` was read as a
    /// count of 2, a number no other JSON reader accepts. A count must be a valid JSON number.
    @Test func countsThatAreNotJSONNumbersAreNotRead() {
        #expect(PusherChannelInfo(json: #"{"user_count":02}"#).userCount == nil)
        #expect(PusherChannelInfo(json: #"{"user_count":+2,"subscription_count":-0}"#).userCount == nil)
        let valid = PusherChannelInfo(json: #"{"occupied":true,"user_count":0,"subscription_count":12}"#)
        #expect(valid.userCount == 0)
        #expect(valid.subscriptionCount == 12)
        #expect(valid.occupied == true)
        #expect(PusherChannelInfo(json: #"{"occupied":truex}"#).occupied == nil)
    }

    @Test func framesWeSendRoundTrip() throws {
        let text = ClientFrame.clientEvent(channel: "private-a", event: "client-x", data: "line\n\"quoted\"\u{1}")
        let frame = try PusherFrame.parse(text)
        #expect(frame.data == "line\n\"quoted\"\u{1}")
        let server = PusherFrame(event: "e", channel: "c", data: #"{"k":"v"}"#, userID: "7")
        #expect(try PusherFrame.parse(server.serverText) == server)
    }
}

@Suite struct EncryptedChannelTests {
    @Test func secretboxVectorDecryptsWithLibsodium() throws {
        let vectors = try CryptoVectors.load()
        #expect(!vectors.secretbox.isEmpty)
        for vector in vectors.secretbox {
            let key = bytes(hex: vector.key_hex)
            let nonce = try #require(Data(base64Encoded: vector.nonce_base64))
            let ciphertext = try #require(Data(base64Encoded: vector.ciphertext_base64))
            let plaintext = try #require(SecretBox.open(ciphertext: Array(ciphertext), nonce: Array(nonce), key: key))
            #expect(String(decoding: plaintext, as: UTF8.self) == vector.plaintext)
            #expect(SecretBox.openEventData(vector.wire_data, key: key) == vector.plaintext)
            // A wrong key or a flipped bit is refused, not garbage.
            var wrongKey = key
            wrongKey[0] ^= 1
            #expect(SecretBox.open(ciphertext: Array(ciphertext), nonce: Array(nonce), key: wrongKey) == nil)
            var tampered = Array(ciphertext)
            tampered[tampered.count - 1] ^= 1
            #expect(SecretBox.open(ciphertext: tampered, nonce: Array(nonce), key: key) == nil)
        }
    }

    @Test func inlineSignerDerivesTheVectorsSharedSecret() throws {
        let vectors = try CryptoVectors.load()
        let vector = try #require(vectors.channel_auth.first { $0.shared_secret_base64 != nil })
        let signer = try PusherInlineSigner(
            key: vector.key,
            secret: vector.secret,
            encryptionMasterKeyBase64: vector.encryption_master_key_base64
        )
        let auth = try signer.authorize(PusherAuthRequest(socketID: vector.socket_id, channelName: vector.channel))
        #expect(auth.auth == vector.auth)
        #expect(auth.sharedSecret.map { Data($0).base64EncodedString() } == vector.shared_secret_base64)
        // The same key through an auth endpoint's JSON reply.
        let reply = try PusherChannelAuth(json: #"{"auth":"\#(vector.auth)","shared_secret":"\#(vector.shared_secret_base64 ?? "")"}"#)
        #expect(reply == auth)
    }

    /// shared_secret end to end: derived key → subscribe → an event sealed by the server side
    /// with that key is delivered decrypted; a rotated key triggers exactly one refetch.
    @Test func sharedSecretPathEndToEndThroughTheStateMachine() throws {
        let masterKey = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let signer = try PusherInlineSigner(key: "k", secret: "s", encryptionMasterKeyBase64: masterKey)
        let channel = "private-encrypted-orders"
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested(channel, now: clock.now)
        connect(&machine, clock, socketID: "1.1")
        let auth = try signer.authorize(PusherAuthRequest(socketID: "1.1", channelName: channel))
        let key = try #require(auth.sharedSecret)
        _ = machine.authorizationSucceeded(channel: channel, socketID: "1.1", auth: auth, now: clock.now)
        _ = machine.receivedFrame(PusherFrame(event: "pusher_internal:subscription_succeeded", channel: channel), now: clock.now)

        let wire = try #require(SecretBox.sealEventData(#"{"order":42}"#, key: key))
        #expect(
            machine.receivedFrame(PusherFrame(event: "new-order", channel: channel, data: wire), now: clock.now)
                == [.deliver(PusherEvent(name: "new-order", channel: channel, data: #"{"order":42}"#))])

        // Sealed with another key: one refetch, queued events delivered with the new key.
        let rotated = [UInt8](repeating: 7, count: 32)
        let rotatedWire = try #require(SecretBox.sealEventData("second", key: rotated))
        #expect(
            machine.receivedFrame(PusherFrame(event: "e2", channel: channel, data: rotatedWire), now: clock.now)
                == [.authorize(channel: channel, socketID: "1.1")])
        let thirdWire = try #require(SecretBox.sealEventData("third", key: rotated))
        #expect(machine.receivedFrame(PusherFrame(event: "e3", channel: channel, data: thirdWire), now: clock.now) == [])
        let refetched = machine.authorizationSucceeded(
            channel: channel,
            socketID: "1.1",
            auth: PusherChannelAuth(auth: auth.auth, sharedSecret: rotated),
            now: clock.now
        )
        #expect(
            refetched == [
                .deliver(PusherEvent(name: "e2", channel: channel, data: "second")),
                .deliver(PusherEvent(name: "e3", channel: channel, data: "third")),
            ])

        // Garbage after a refetch that did not help: an error, no second refetch.
        _ = machine.receivedFrame(PusherFrame(event: "bad", channel: channel, data: wire), now: clock.now)
        let noHelp = machine.authorizationSucceeded(
            channel: channel, socketID: "1.1", auth: PusherChannelAuth(auth: auth.auth, sharedSecret: rotated), now: clock.now)
        #expect(noHelp == [.error(.decryptionFailed(channel: channel, event: "bad"))])
        #expect(
            machine.receivedFrame(PusherFrame(event: "bad2", channel: channel, data: "not json"), now: clock.now)
                == [.error(.decryptionFailed(channel: channel, event: "bad2"))])
    }

    @Test func encryptedChannelAuthWithoutSharedSecretFails() {
        var machine = makeMachine()
        let clock = ManualClock()
        _ = machine.subscribeRequested("private-encrypted-x", now: clock.now)
        connect(&machine, clock, socketID: "1.1")
        let actions = machine.authorizationSucceeded(
            channel: "private-encrypted-x", socketID: "1.1", auth: PusherChannelAuth(auth: "k:x"), now: clock.now)
        #expect(actions.count == 1)
        #expect(
            actions.allSatisfy { if case .subscriptionFailed(_, let e) = $0 { e.description.contains("shared_secret") } else { false } })
    }

    @Test func inlineSignerBuildsPresenceChannelData() throws {
        let signer = try PusherInlineSigner(key: "foo", secret: "bar", userID: "fred", userInfoJSON: #"{"key":"value"}"#)
        let auth = try signer.authorize(PusherAuthRequest(socketID: "345.43245", channelName: "presence-channel"))
        // The vector from pusher-http-python (same channel_data bytes, same signature).
        #expect(auth.channelData == #"{"user_id":"fred","user_info":{"key":"value"}}"#)
        #expect(auth.auth == "foo:e80ba6439492c2113022c39297a87a948de14061cc67b5788e045645a68b8ccd")
        #expect(throws: PusherError.self) { try PusherInlineSigner(key: "k", secret: "s", userInfoJSON: "not json") }
        #expect(throws: PusherError.self) { try PusherInlineSigner(key: "k", secret: "s", encryptionMasterKeyBase64: "c2hvcnQ=") }
    }
}
