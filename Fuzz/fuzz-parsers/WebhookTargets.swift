import PusherProtocol

@testable import BridgeCore

/// The fuzz target for webhooks in (docs/contract.md §7.2): request checking, the body parser and
/// the translation into MQTT publishes.
enum WebhookTargets {
    /// A clock for the dedupe window that only moves when told.
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    static let prefix = "fuzz/p"
    static let secret = "fuzz-secret"

    /// The input is a request body. Byte 0 `!` sends it with a wrong signature (the rest is the
    /// body). Checks: a wrong signature is always 401; a body that is not JSON is 400; an accepted
    /// body's events re-encoded parse to the same events; every topic is valid, lies under
    /// `P/channels/<one level>/` and has the level count its kind gives (escaping never adds a
    /// level, §5.1); counts are decimal and equal the members known; the same body again is a duplicate.
    static func requests(_ input: Input) -> Int32 {
        let wrongSignature = input.bytes.first == UInt8(ascii: "!")
        let body = wrongSignature ? Array(input.bytes.dropFirst()) : input.bytes
        var receiver = WebhookReceiver<Instant>(
            webhooks: BridgeWebhookSettings(topicPrefix: prefix), key: "fuzz-key", secret: secret)
        let now = Instant(offset: .zero)
        let good = hmacSHA256Hex(secret: secret, message: body)
        // A wrong signature differs from the right one in its first digit.
        let signature = wrongSignature ? (good.hasPrefix("0") ? "1" : "0") + good.dropFirst() : good
        let decision = receiver.requestReceived(body: body, key: "fuzz-key", signature: String(signature), now: now)
        switch decision {
        case .refused(let refusal):
            if wrongSignature, refusal.outcome != .unauthorized { violated("wrong signature answered \(refusal.outcome)") }
            if !wrongSignature {
                guard refusal.outcome == .badRequest else { violated("signed body refused as \(refusal.outcome)") }
                if case .success = PusherWebhookBody.parse(body) { violated("a body that parses was refused: \(refusal.reason)") }
            }
            return 0
        case .duplicate:
            violated("a first request was a duplicate")
        case .accepted(let acceptance):
            if wrongSignature { violated("a wrong signature was accepted") }
            if !JSONTokenizer.isValid(body) { violated("a body that is not JSON was accepted") }
            checkRoundTrip(acceptance.events)
            checkPublishes(acceptance, receiver: receiver)
            let again = receiver.requestReceived(
                body: body, key: "fuzz-key", signature: String(signature), now: now.advanced(by: .seconds(1)))
            if again != .duplicate { violated("the same body again was not a duplicate") }
        }
        return 0
    }

    private static func checkRoundTrip(_ events: [PusherWebhookEvent]) {
        var text = "{\"events\":["
        for (index, event) in events.enumerated() {
            if index > 0 { text += "," }
            text += "{\"name\":" + JSONString.quoted(event.name) + ",\"channel\":" + JSONString.quoted(event.channel)
            if let userID = event.userID { text += ",\"user_id\":" + JSONString.quoted(userID) }
            if let name = event.event { text += ",\"event\":" + JSONString.quoted(name) }
            if let data = event.data { text += ",\"data\":" + JSONString.quoted(data) }
            if let socketID = event.socketID { text += ",\"socket_id\":" + JSONString.quoted(socketID) }
            if let count = event.subscriptionCount { text += ",\"subscription_count\":" + String(count) }
            text += "}"
        }
        text += "]}"
        guard case .success(let reparsed) = PusherWebhookBody.parse(Array(text.utf8)) else {
            violated("re-encoded events do not parse: \(text.debugDescription)")
        }
        if reparsed.events != events { violated("re-encoded events parse differently: \(text.debugDescription)") }
    }

    private static func checkPublishes(_ acceptance: WebhookAcceptance, receiver: WebhookReceiver<Instant>) {
        let head = prefix + "/channels/"
        var lastCount: [String: Int] = [:]
        for publish in acceptance.publishes {
            if let problem = TopicName.problem(with: publish.topic) { violated("topic \(publish.topic.debugDescription): \(problem)") }
            guard publish.topic.hasPrefix(head) else { violated("topic \(publish.topic.debugDescription) is outside the prefix") }
            let levels = publish.topic.dropFirst(head.count).split(separator: "/", omittingEmptySubsequences: false)
            guard levels.count >= 2, let channel = TopicLevelEscaping.unescape(levels[0]) else {
                violated("topic \(publish.topic.debugDescription) has no channel level")
            }
            let expected: Int
            switch levels[1] {
            case "occupied", "count", "cache-miss", "subscription_count": expected = 2
            case "members", "client-events": expected = 3
            default: violated("topic \(publish.topic.debugDescription) has an unknown kind")
            }
            if levels.count != expected { violated("topic \(publish.topic.debugDescription) has \(levels.count) levels, not \(expected)") }
            if expected == 3, TopicLevelEscaping.unescape(levels[2]) == nil { violated("level \(levels[2]) does not unescape") }
            if levels[1] == "count" {
                guard let count = Int(String(decoding: publish.payload, as: UTF8.self)), count >= 0 else {
                    violated("count payload \(publish.payload) is not a decimal")
                }
                lastCount[channel] = count
            }
            if publish.retain == false, levels[1] != "client-events", levels[1] != "cache-miss" {
                violated("\(publish.topic.debugDescription) should be retained")
            }
        }
        for (channel, count) in lastCount {
            let known = receiver.translator.members(of: channel).count
            if known != count { violated("last count \(count) of \(channel.debugDescription) is not the \(known) members known") }
        }
    }
}
