import MQTTVocabulary
import PusherProtocol
import TestSupport
import Testing

@testable import BridgeCore
@testable import PusherProtocol

private let t0 = TestInstant(offset: .zero)
private let key = "278d425bdf160c739803"
private let secret = "7ad3773142a6692b25b8"

private func receiver(_ settings: BridgeWebhookSettings = BridgeWebhookSettings(topicPrefix: "P")) -> WebhookReceiver<TestInstant> {
    WebhookReceiver(webhooks: settings, key: key, secret: secret)
}

private func body(_ events: String, time: Int64 = 1_795_000_000_123) -> [UInt8] {
    Array("{\"time_ms\":\(time),\"events\":[\(events)]}".utf8)
}

private func sign(_ bytes: [UInt8]) -> String { hmacSHA256Hex(secret: secret, message: bytes) }

extension WebhookDecision {
    fileprivate var acceptance: WebhookAcceptance? { if case .accepted(let value) = self { value } else { nil } }
    fileprivate var refusal: WebhookRefusal? { if case .refused(let value) = self { value } else { nil } }
}

private func topics(_ publishes: [MQTTPublish]) -> [String] {
    publishes.map { "\($0.topic)=\(String(decoding: $0.payload, as: UTF8.self))\($0.retain ? " (retained)" : "")" }
}

@Suite struct WebhookReceiverTests {
    // MARK: checking, in order

    @Test func signatureIsTheHexHMACOfTheRawBody() {
        // The example of Pusher's webhook docs, re-computed: hex(HMAC-SHA256(secret, body)).
        let bytes = Array(#"{"time_ms":1327078148132,"events":[{"name":"channel_occupied","channel":"test_channel"}]}"#.utf8)
        #expect(sign(bytes) == hmacSHA256Hex(secret: secret, message: String(decoding: bytes, as: UTF8.self)))
        var r = receiver()
        let decision = r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0)
        #expect(topics(decision.acceptance?.publishes ?? []) == ["P/channels/test_channel/occupied=true (retained)"])
        // Upper-case hex is the same signature.
        var again = receiver()
        let result1 = again.requestReceived(body: bytes, key: key, signature: sign(bytes).uppercased(), now: t0)
        #expect(result1.acceptance != nil)
    }

    @Test func sizeIsCheckedFirstThenKeyAndSignatureThenJSON() {
        var r = receiver()
        let huge = Array(repeating: UInt8(ascii: " "), count: WebhookReceiver<TestInstant>.maximumBodyBytes + 1)
        // Too large wins even with a wrong signature.
        let result2 = r.requestReceived(body: huge, key: "wrong", signature: "00", now: t0)
        #expect(result2.refusal?.outcome == .tooLarge)
        // Exactly 1 MiB is not too large: it is checked further (here: not JSON → 400 after a good signature).
        let limit = Array(repeating: UInt8(ascii: "x"), count: WebhookReceiver<TestInstant>.maximumBodyBytes)
        let result3 = r.requestReceived(body: limit, key: key, signature: sign(limit), now: t0)
        #expect(result3.refusal?.outcome == .badRequest)
        // Not JSON with a wrong signature: 401, not 400.
        let notJSON = Array("hello".utf8)
        let result4 = r.requestReceived(body: notJSON, key: key, signature: "deadbeef", now: t0)
        #expect(result4.refusal?.outcome == .unauthorized)
        let result5 = r.requestReceived(body: notJSON, key: key, signature: sign(notJSON), now: t0)
        #expect(result5.refusal?.outcome == .badRequest)
    }

    @Test(
        arguments: [
            ("wrong key", "other-key", true, "X-Pusher-Key is not this bridge's key"),
            ("no key", nil, true, "no X-Pusher-Key"),
            ("no signature", key, false, "no X-Pusher-Signature"),
        ] as [(String, String?, Bool, String)])
    func unauthorized(_ name: String, _ sentKey: String?, _ signed: Bool, _ reason: String) {
        var r = receiver()
        let bytes = body(#"{"name":"channel_occupied","channel":"c"}"#)
        let refusal = r.requestReceived(body: bytes, key: sentKey, signature: signed ? sign(bytes) : nil, now: t0).refusal
        #expect(refusal == WebhookRefusal(outcome: .unauthorized, reason: reason), "\(name)")
        #expect(refusal?.outcome.httpStatus == 401)
    }

    @Test func aSignatureOfAnotherBodyOrSecretIsRefused() {
        var r = receiver()
        let bytes = body(#"{"name":"channel_occupied","channel":"c"}"#)
        let tampered = body(#"{"name":"channel_occupied","channel":"d"}"#)
        let result6 = r.requestReceived(body: tampered, key: key, signature: sign(bytes), now: t0)
        #expect(result6.refusal?.outcome == .unauthorized)
        let otherSecret = hmacSHA256Hex(secret: "not-the-secret", message: bytes)
        let result7 = r.requestReceived(body: bytes, key: key, signature: otherSecret, now: t0)
        #expect(result7.refusal?.outcome == .unauthorized)
    }

    @Test(arguments: [
        "", "[]", "{}", #"{"events":{}}"#, #"{"events":[1]}"#, #"{"events":[{"channel":"c"}]}"#,
        #"{"events":[{"name":"channel_occupied"}]}"#, #"{"events":[{"name":"channel_occupied","channel":""}]}"#,
        #"{"events":[{"name":7,"channel":"c"}]}"#, #"{"events":[]"#, #"{"events":[]} x"#, "\u{FEFF}{\"events\":[]}",
        #"{"events":[{"name":"channel_occupied","channel":"c"}],}"#,
    ])
    func badJSONIs400(_ text: String) {
        var r = receiver()
        let bytes = Array(text.utf8)
        let refusal = r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).refusal
        #expect(refusal?.outcome == .badRequest)
        #expect(refusal?.outcome.httpStatus == 400)
    }

    @Test func parsesEveryFieldAndToleratesExtras() throws {
        let text = #"""
            {"time_ms":5,"extra":{"a":[1,2]},"events":[{"name":"client_event","channel":"private-x","event":"client-go",
            "data":"{\"a\":1}","socket_id":"1.2","user_id":42,"future":true},
            {"name":"subscription_count","channel":"c","subscription_count":3}]}
            """#
        let parsed = try PusherWebhookBody.parse(Array(text.utf8)).get()
        #expect(parsed.timeMillis == 5)
        #expect(
            parsed.events == [
                PusherWebhookEvent(
                    name: "client_event", channel: "private-x", userID: "42", event: "client-go", data: #"{"a":1}"#, socketID: "1.2"),
                PusherWebhookEvent(name: "subscription_count", channel: "c", subscriptionCount: 3),
            ])
        // time_ms is optional.
        #expect(try PusherWebhookBody.parse(Array(#"{"events":[]}"#.utf8)).get() == PusherWebhookBody(events: []))
    }

    // MARK: translation (docs/contract.md §7.2 table)

    @Test func eachKindGoesToItsTopic() throws {
        var r = receiver(BridgeWebhookSettings(topicPrefix: "pusher/factory", qos: 2))
        let bytes = body(
            #"""
            {"name":"channel_occupied","channel":"presence-a/b"},
            {"name":"member_added","channel":"presence-a/b","user_id":"u+1"},
            {"name":"client_event","channel":"private-c","event":"client-#1","data":"hi","user_id":"u1"},
            {"name":"client_event","channel":"private-c","event":"client-x","data":"no user"},
            {"name":"cache_miss","channel":"cache-d"},
            {"name":"subscription_count","channel":"e","subscription_count":12},
            {"name":"member_removed","channel":"presence-a/b","user_id":"u+1"},
            {"name":"channel_vacated","channel":"presence-a/b"}
            """#)
        let accepted = try #require(r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).acceptance)
        #expect(
            topics(accepted.publishes) == [
                "pusher/factory/channels/presence-a%2Fb/occupied=true (retained)",
                "pusher/factory/channels/presence-a%2Fb/members/u%2B1={} (retained)",
                "pusher/factory/channels/presence-a%2Fb/count=1 (retained)",
                "pusher/factory/channels/private-c/client-events/client-%231=hi",
                "pusher/factory/channels/private-c/client-events/client-x=no user",
                "pusher/factory/channels/cache-d/cache-miss={}",
                "pusher/factory/channels/e/subscription_count=12 (retained)",
                "pusher/factory/channels/presence-a%2Fb/members/u%2B1= (retained)",
                "pusher/factory/channels/presence-a%2Fb/count=0 (retained)",
                "pusher/factory/channels/presence-a%2Fb/occupied= (retained)",
                "pusher/factory/channels/presence-a%2Fb/count=0 (retained)",
            ])
        #expect(accepted.publishes.allSatisfy { $0.qos == 2 && $0.rule == "webhooks" })
        #expect(accepted.publishes[3].userProperties == [MQTTUserProperty("pusher-user-id", "u1")])
        #expect(accepted.publishes[4].userProperties.isEmpty)
        #expect(accepted.events.count == 8)
        #expect(accepted.skipped.isEmpty)
    }

    @Test func memberFlappingKeepsTheCountRight() throws {
        var r = receiver()
        var counts: [String] = []
        let sequence = [
            ("member_added", "a"), ("member_added", "b"), ("member_removed", "a"), ("member_added", "a"), ("member_added", "a"),
            ("member_removed", "b"), ("member_removed", "b"), ("member_removed", "a"), ("member_added", "c"),
        ]
        for (index, (name, user)) in sequence.enumerated() {
            let bytes = body(#"{"name":"\#(name)","channel":"presence-r","user_id":"\#(user)"}"#, time: Int64(index))
            let accepted = try #require(r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).acceptance)
            counts += accepted.publishes.filter { $0.topic.hasSuffix("/count") }.map { String(decoding: $0.payload, as: UTF8.self) }
        }
        #expect(counts == ["1", "2", "1", "2", "2", "1", "1", "0", "1"])
        #expect(r.translator.members(of: "presence-r") == ["c"])
    }

    @Test func vacatedClearsTheMembersItKnew() throws {
        var r = receiver()
        let bytes = body(
            #"""
            {"name":"member_added","channel":"presence-r","user_id":"b"},{"name":"member_added","channel":"presence-r","user_id":"a"},
            {"name":"channel_vacated","channel":"presence-r"}
            """#)
        let accepted = try #require(r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).acceptance)
        #expect(
            Array(topics(accepted.publishes).suffix(4)) == [
                "P/channels/presence-r/occupied= (retained)", "P/channels/presence-r/members/a= (retained)",
                "P/channels/presence-r/members/b= (retained)", "P/channels/presence-r/count=0 (retained)",
            ])
        #expect(r.translator.members(of: "presence-r").isEmpty)
        // A public channel without members: only the occupied topic.
        let plain = body(#"{"name":"channel_vacated","channel":"public"}"#)
        let vacated = try #require(r.requestReceived(body: plain, key: key, signature: sign(plain), now: t0).acceptance)
        #expect(topics(vacated.publishes) == ["P/channels/public/occupied= (retained)"])
    }

    @Test func unknownIgnoredAndInvalidEventsAreCountedAndSkipped() throws {
        var r = receiver(
            BridgeWebhookSettings(topicPrefix: "P", events: [.channelOccupied, .memberAdded, .clientEvent, .subscriptionCount]))
        let long = String(repeating: "x", count: 70_000)
        let bytes = body(
            #"""
            {"name":"channel_exploded","channel":"c"},{"name":"cache_miss","channel":"c"},
            {"name":"member_added","channel":"presence-c"},{"name":"client_event","channel":"private-c"},
            {"name":"subscription_count","channel":"c","subscription_count":"3"},{"name":"channel_occupied","channel":"\#(long)"},
            {"name":"channel_occupied","channel":"ok"}
            """#)
        let accepted = try #require(r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).acceptance)
        #expect(topics(accepted.publishes) == ["P/channels/ok/occupied=true (retained)"])
        #expect(accepted.skipped == [.unknownEvent: 1, .ignored: 1, .invalidEvent: 4])
    }

    @Test func reloadedSettingsApplyToTheNextRequest() throws {
        var r = receiver()
        r.settingsChanged(to: BridgeWebhookSettings(topicPrefix: "Q", qos: 0))
        let bytes = body(#"{"name":"cache_miss","channel":"c"}"#)
        let accepted = try #require(r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).acceptance)
        #expect(topics(accepted.publishes) == ["Q/channels/c/cache-miss={}"])
        #expect(accepted.publishes[0].qos == 0)
    }

    // MARK: dedupe

    @Test func theSameBodyWithinFiveMinutesPublishesOnce() throws {
        var r = receiver()
        let bytes = body(#"{"name":"channel_occupied","channel":"c"}"#)
        let result8 = r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0)
        #expect(result8.acceptance != nil)
        let result9 = r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0.advanced(by: .seconds(299)))
        #expect(result9 == .duplicate)
        // A refused repeat is still refused, not a duplicate: the signature is checked first.
        let result10 = r.requestReceived(body: bytes, key: key, signature: "bad", now: t0.advanced(by: .seconds(1)))
        #expect(result10.refusal?.outcome == .unauthorized)
        let result11 = r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0.advanced(by: .seconds(300)))
        #expect(result11.acceptance != nil)
    }

    @Test func anUnavailableRequestIsForgottenSoItsRetryGoesThrough() throws {
        var r = receiver()
        let bytes = body(#"{"name":"member_added","channel":"presence-c","user_id":"u"}"#)
        let first = try #require(r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0).acceptance)
        r.requestUnavailable(first.digest)
        let retry = try #require(
            r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0.advanced(by: .seconds(5))).acceptance)
        // Translating again gives the same retained state.
        #expect(topics(retry.publishes) == topics(first.publishes))
        let result12 = r.requestReceived(body: bytes, key: key, signature: sign(bytes), now: t0.advanced(by: .seconds(6)))
        #expect(result12 == .duplicate)
    }

    @Test func theDedupeWindowIsBounded() {
        var window = WebhookDedupeWindow<TestInstant>(window: .seconds(300), capacity: 3)
        let digests = (0..<5).map { MessageDigest(parts: [[UInt8($0)]]) }
        for (index, digest) in digests.enumerated() {
            let repeated = window.isRepeat(digest, now: t0.advanced(by: .seconds(index)))
            #expect(!repeated)
        }
        #expect(window.count == 3)
        // The oldest two were forgotten to stay within capacity; the newest three are remembered.
        let result14 = window.isRepeat(digests[0], now: t0.advanced(by: .seconds(10)))
        #expect(!result14)
        let result15 = window.isRepeat(digests[4], now: t0.advanced(by: .seconds(10)))
        #expect(result15)
        // Expiry by time.
        let result16 = window.isRepeat(digests[4], now: t0.advanced(by: .seconds(400)))
        #expect(!result16)
        #expect(window.count <= 3)
        // Forget and re-add many times: memory stays bounded.
        for round in 0..<10_000 {
            window.forget(digests[1])
            _ = window.isRepeat(digests[1], now: t0.advanced(by: .seconds(500) + .milliseconds(round)))
        }
        #expect(window.count <= 3)
    }
}
