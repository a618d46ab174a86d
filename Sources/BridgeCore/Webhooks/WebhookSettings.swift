/// The webhook events Pusher sends (docs/pusher-protocol.md §2, "Webhooks"), as `[bridge.webhooks] events` names them.
public enum PusherWebhookKind: String, Sendable, Hashable, CaseIterable {
    /// The first subscriber joined a channel.
    case channelOccupied = "channel_occupied"
    /// The last subscriber left a channel.
    case channelVacated = "channel_vacated"
    /// A user joined a presence channel.
    case memberAdded = "member_added"
    /// A user left a presence channel.
    case memberRemoved = "member_removed"
    /// A client event was sent on a private or presence channel.
    case clientEvent = "client_event"
    /// A cache channel was joined while it held no cached event.
    case cacheMiss = "cache_miss"
    /// The number of subscriptions of a channel changed.
    case subscriptionCount = "subscription_count"
}

/// `[bridge.webhooks]` (docs/contract.md §7.2): where the webhooks Pusher posts for this bridge
/// are published on MQTT. Present only when `topic_prefix` is set.
public struct BridgeWebhookSettings: Sendable, Equatable {
    /// `topic_prefix` `P`: everything goes under `P/channels/<channel>/…`.
    public var topicPrefix: String
    /// `events`: the kinds that are published (default: all seven); others are accepted and ignored.
    public var events: Set<PusherWebhookKind>
    /// `qos`, default 1: the QoS of every publish.
    public var qos: Int

    /// Settings from their parts.
    public init(topicPrefix: String, events: Set<PusherWebhookKind> = Set(PusherWebhookKind.allCases), qos: Int = 1) {
        self.topicPrefix = topicPrefix
        self.events = events
        self.qos = qos
    }
}
