import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// What became of one event of an accepted webhook request, besides its publishes.
public enum WebhookEventOutcome: String, Sendable, Equatable, CaseIterable {
    /// Translated into MQTT publishes.
    case published
    /// A name this version does not know: counted and skipped (docs/contract.md §7.2).
    case unknownEvent = "unknown_event"
    /// A known kind left out of `[bridge.webhooks] events`: skipped.
    case ignored
    /// A known kind without a field it needs (`user_id`, `event`, `subscription_count`), or whose
    /// topic would be longer than MQTT allows: skipped.
    case invalidEvent = "invalid_event"
}

/// Turns webhook events into MQTT publishes under `topic_prefix` `P` (docs/contract.md §7.2), and
/// keeps the members of each channel as webhooks report them, for `P/channels/<channel>/count`.
///
/// | webhook | publishes |
/// |---|---|
/// | `channel_occupied` | `P/channels/<c>/occupied` retained `true` |
/// | `channel_vacated` | `P/channels/<c>/occupied` deleted; the members it knew deleted; `count` `0` |
/// | `member_added` / `member_removed` | `P/channels/<c>/members/<u>` retained `{}` / deleted; `count` retained |
/// | `client_event` | `P/channels/<c>/client-events/<e>`, payload = `data`, user property `pusher-user-id` |
/// | `cache_miss` | `P/channels/<c>/cache-miss`, payload `{}` |
/// | `subscription_count` | `P/channels/<c>/subscription_count` retained, decimal |
///
/// Channel names, user ids and event names are escaped as one topic level each (docs/contract.md
/// §5.1). Applying the same event twice gives the same retained state, so a request translated
/// again after a 503 does no harm. Pure value type.
public struct WebhookTranslator: Sendable {
    /// The `rule` label of every webhook publish in `messages_total`.
    public static let ruleName = "webhooks"
    /// `[bridge.webhooks]`.
    public private(set) var settings: BridgeWebhookSettings
    /// Members per channel as the webhooks told them; a channel with none has no entry.
    private var members: [String: Set<String>] = [:]

    /// A translator with no members known yet (after a restart, members are learned only from new webhooks).
    public init(settings: BridgeWebhookSettings) {
        self.settings = settings
    }

    /// New `[bridge.webhooks]` after a reload; the members known so far are kept.
    public mutating func settingsChanged(to settings: BridgeWebhookSettings) {
        self.settings = settings
    }

    /// The members known for `channel`.
    public func members(of channel: String) -> Set<String> { members[channel] ?? [] }

    /// The publishes for one event, appended to `publishes`, and what became of it.
    public mutating func translate(_ event: PusherWebhookEvent, into publishes: inout [MQTTPublish]) -> WebhookEventOutcome {
        guard let kind = event.kind else { return .unknownEvent }
        guard settings.events.contains(kind) else { return .ignored }
        let base = settings.topicPrefix + "/channels/" + TopicLevelEscaping.escape(event.channel)
        guard TopicName.problem(with: base + "/subscription_count") == nil else { return .invalidEvent }
        var made: [MQTTPublish] = []
        func publish(_ suffix: String, _ payload: String, retain: Bool, userProperties: [MQTTUserProperty] = []) {
            made.append(
                MQTTPublish(
                    rule: Self.ruleName, topic: base + "/" + suffix, payload: Array(payload.utf8), qos: settings.qos, retain: retain,
                    userProperties: userProperties))
        }
        switch kind {
        case .channelOccupied:
            publish("occupied", "true", retain: true)
        case .channelVacated:
            publish("occupied", "", retain: true)
            let known = members.removeValue(forKey: event.channel) ?? []
            for userID in known.sorted() { publish("members/" + TopicLevelEscaping.escape(userID), "", retain: true) }
            if !known.isEmpty || event.channel.hasPrefix("presence-") { publish("count", "0", retain: true) }
        case .memberAdded, .memberRemoved:
            guard let userID = event.userID, !userID.isEmpty else { return .invalidEvent }
            let topicLevel = "members/" + TopicLevelEscaping.escape(userID)
            guard TopicName.problem(with: base + "/" + topicLevel) == nil else { return .invalidEvent }
            var known = members[event.channel] ?? []
            if kind == .memberAdded {
                known.insert(userID)
                publish(topicLevel, "{}", retain: true)
            } else {
                known.remove(userID)
                publish(topicLevel, "", retain: true)
            }
            members[event.channel] = known.isEmpty ? nil : known
            publish("count", String(known.count), retain: true)
        case .clientEvent:
            guard let name = event.event, !name.isEmpty else { return .invalidEvent }
            let properties = event.userID.map { [MQTTUserProperty("pusher-user-id", $0)] } ?? []
            publish("client-events/" + TopicLevelEscaping.escape(name), event.data ?? "", retain: false, userProperties: properties)
        case .cacheMiss:
            publish("cache-miss", "{}", retain: false)
        case .subscriptionCount:
            guard let count = event.subscriptionCount, count >= 0 else { return .invalidEvent }
            publish("subscription_count", String(count), retain: true)
        }
        guard made.allSatisfy({ TopicName.problem(with: $0.topic) == nil }) else { return .invalidEvent }
        publishes += made
        return .published
    }
}
