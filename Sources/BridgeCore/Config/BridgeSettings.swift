import Backoff
import BridgeVocabulary
import MQTTVocabulary

/// One `[[bridge]]`: one Pusher app, one MQTT broker, their rules. Bridges run side by side.
public struct BridgeSettings: Sendable, Equatable {
    /// `name`: `[a-z0-9_-]+`, unique; used in logs, metrics, the status topic, `{bridge}`.
    public var name: String
    /// `[bridge.pusher]`.
    public var pusher: PusherSettings
    /// `[bridge.mqtt]`.
    public var mqtt: MQTTSettings
    /// `[bridge.reconnect]`, for both sides (docs/contract.md §5.5).
    public var reconnect: ReconnectPolicy
    /// `[bridge.buffer]`, per direction.
    public var buffer: BufferSettings
    /// `[[bridge.rule]]`, in file order.
    public var rules: [BridgeRule]
    /// `[[bridge.presence]]`, in file order.
    public var presence: [PresenceMirrorRule]
    /// `[bridge.webhooks]`: `nil` unless `topic_prefix` is set (docs/contract.md §7.2).
    public var webhooks: BridgeWebhookSettings?
    /// `[bridge.cluster]` (docs/contract.md §7.4); nil when this daemon runs the bridge alone.
    public var cluster: ClusterSettings?
    /// `[bridge.users]` (docs/contract.md §8.2); nil when not mirrored.
    public var users: UsersSettings?
    /// `max_dead_letters`, default 10,000: the bound of the bridge's dead-letter store (docs/contract.md §8.3).
    public var maxDeadLetters: Int
    public static let defaultMaxDeadLetters = 10_000

    public init(
        name: String, pusher: PusherSettings, mqtt: MQTTSettings, reconnect: ReconnectPolicy = .default,
        buffer: BufferSettings = BufferSettings(), rules: [BridgeRule] = [], presence: [PresenceMirrorRule] = [],
        webhooks: BridgeWebhookSettings? = nil, cluster: ClusterSettings? = nil, users: UsersSettings? = nil,
        maxDeadLetters: Int = BridgeSettings.defaultMaxDeadLetters
    ) {
        self.users = users
        self.maxDeadLetters = maxDeadLetters
        self.webhooks = webhooks
        self.name = name
        self.pusher = pusher
        self.mqtt = mqtt
        self.reconnect = reconnect
        self.buffer = buffer
        self.rules = rules
        self.presence = presence
        self.cluster = cluster
    }

    /// The Pusher → MQTT rules, in file order.
    public var pusherToMQTTRules: [PusherToMQTTRule] {
        rules.compactMap { if case .pusherToMQTT(let rule) = $0 { rule } else { nil } }
    }

    /// The MQTT → Pusher rules, in file order.
    public var mqttToPusherRules: [MQTTToPusherRule] {
        rules.compactMap { if case .mqttToPusher(let rule) = $0 { rule } else { nil } }
    }

    /// Every Pusher channel this bridge subscribes to, each once: the channels of Pusher → MQTT
    /// rules, of presence mirrors, and of `via = "client-event"` rules (a client event can only
    /// be sent on a channel the connection is subscribed to, docs/pusher-protocol.md §1).
    public var pusherChannels: [String] {
        var seen = Set<String>()
        var channels: [String] = []
        let clientEventChannels = mqttToPusherRules.filter { $0.via == .clientEvent }.map(\.channel.literalText)
        let exactRules = pusherToMQTTRules.filter { $0.discovery == nil }.map(\.channel)
        let exactMirrors = presence.filter { $0.discovery == nil }.map(\.channel)
        for channel in exactRules + exactMirrors + clientEventChannels where seen.insert(channel).inserted {
            channels.append(channel)
        }
        return channels
    }

    /// Every MQTT subscription this bridge makes, each filter once.
    ///
    /// Rules with `from = "mqtt"` subscribe with `no_local` (MQTT 5; docs/contract.md §5.4: never receive
    /// what the bridge itself published) and, unless `forward_retained`, with retain handling
    /// "do not send" so retained messages are not replayed into Pusher on (re)subscribe.
    /// Presence mirrors subscribe to `T/members/+` to find retained members left by an earlier
    /// run (§5.3); that subscription must receive retained messages and is made *without*
    /// `no_local`, because the ghosts were published under the bridge's own client id.
    /// When two entries share a filter, the highest QoS wins, `no_local` only if both ask for it,
    /// and retained messages are sent if either wants them.
    public var mqttSubscriptions: [BridgeSubscription] {
        // Keyed by the filter's bytes: filters that differ only in Unicode normalisation are
        // different subscriptions to the broker (MQTTTopicText).
        var order: [MQTTTopicText.Key] = []
        var byFilter: [MQTTTopicText.Key: BridgeSubscription] = [:]
        func add(_ needed: BridgeSubscription) {
            let key = MQTTTopicText.Key(Substring(needed.filter))
            if var existing = byFilter[key] {
                existing.subscription.qos = max(existing.subscription.qos, needed.subscription.qos)
                existing.subscription.noLocal = existing.subscription.noLocal && needed.subscription.noLocal
                if needed.subscription.retainHandling == .sendAlways { existing.subscription.retainHandling = .sendAlways }
                existing.purposes += needed.purposes
                byFilter[key] = existing
            } else {
                order.append(key)
                byFilter[key] = needed
            }
        }
        for rule in mqttToPusherRules {
            add(
                BridgeSubscription(
                    MQTTSubscription(
                        rule.filter.text, qos: MQTTQoS(rawValue: rule.qos) ?? .atLeastOnce, noLocal: true,
                        retainHandling: rule.forwardRetained ? .sendAlways : .never),
                    purposes: ["rule \(rule.name)"]))
        }
        for mirror in presence {
            add(
                BridgeSubscription(
                    MQTTSubscription(
                        mirror.retainedMembersFilter, qos: MQTTQoS(rawValue: mirror.qos) ?? .atLeastOnce, noLocal: false,
                        retainHandling: .sendAlways),
                    purposes: [mirror.discovery == nil ? "presence \(mirror.channel)" : "presence prefix \(mirror.channel)"]))
        }
        return order.compactMap { byFilter[$0] }
    }

    /// The presence identity to leave out of mirrored member lists (docs/contract.md §5.3).
    public var ownPresenceUserID: String? { pusher.userID }
}

extension BridgeSettings {
    /// The policy of the Pusher → MQTT buffer: `overflow`, default `drop-oldest`. Pusher cannot
    /// be held back, so `backpressure` means `drop-oldest` in this direction (docs/contract.md §7.6).
    public var pusherToMQTTOverflow: BufferOverflowPolicy {
        buffer.overflow == .backpressure ? .dropOldest : buffer.overflow
    }

    /// The policy of the MQTT → Pusher buffer: `overflow` when the file sets it; otherwise
    /// `backpressure` when a rule reads QoS ≥ 1 (the broker's persistent session is then the
    /// durable queue) and `drop-oldest` when every rule reads QoS 0 (docs/contract.md §7.6).
    public var mqttToPusherOverflow: BufferOverflowPolicy {
        if let setting = buffer.overflowSetting { return setting }
        return mqttToPusherRules.contains { $0.qos >= 1 } ? .backpressure : .dropOldest
    }
}
