import Backoff
import MQTTVocabulary

/// A validated `bridges.conf` (docs/contract.md §4): the daemon settings and one or more bridges.
///
/// Produced by ``ConfigLoader``; every value here has been checked, defaults are filled in,
/// `${VAR}` references are expanded and `*_file` secrets are read. Plain values: compare two of
/// them with ``ConfigDiff`` on reload.
public struct BridgeConfiguration: Sendable, Equatable {
    /// `[daemon]`.
    public var daemon: DaemonSettings
    /// `[[bridge]]`, in file order.
    public var bridges: [BridgeSettings]

    public init(daemon: DaemonSettings, bridges: [BridgeSettings]) {
        self.daemon = daemon
        self.bridges = bridges
    }

    /// The bridge named `name`.
    public func bridge(named name: String) -> BridgeSettings? {
        bridges.first { $0.name == name }
    }
}

/// `[daemon]`: process-wide settings.
public struct DaemonSettings: Sendable, Equatable {
    /// `log_level`, default `info`.
    public var logLevel: LogLevelSetting
    /// `log_format`, default `text`.
    public var logFormat: LogFormat
    /// `metrics`, default `127.0.0.1:9464`; `nil` when set to `""` (off).
    public var metrics: ListenAddress?
    /// `state_dir`, default `/var/lib/pusher-mqtt-bridge` (the spool lives here).
    public var stateDirectory: String
    /// `shutdown_grace`, default 5 s: how long SIGTERM waits for buffers to drain.
    public var shutdownGrace: Duration
    /// `webhooks`: the one HTTP listener for every bridge's webhooks (docs/contract.md §7.2); `nil` (the default, `""`) = off.
    public var webhooks: ListenAddress?

    public init(
        logLevel: LogLevelSetting = .info, logFormat: LogFormat = .text,
        metrics: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 9464),
        stateDirectory: String = "/var/lib/pusher-mqtt-bridge", shutdownGrace: Duration = .seconds(5), webhooks: ListenAddress? = nil
    ) {
        self.logLevel = logLevel
        self.logFormat = logFormat
        self.metrics = metrics
        self.stateDirectory = stateDirectory
        self.shutdownGrace = shutdownGrace
        self.webhooks = webhooks
    }
}

/// `log_level` values (swift-log's levels without `critical`).
public enum LogLevelSetting: String, Sendable, Equatable, CaseIterable {
    /// From most to least verbose; `critical` is not offered (it is for the daemon's own fatal errors).
    case trace, debug, info, notice, warning, error
}

/// `log_format` values.
public enum LogFormat: String, Sendable, Equatable, CaseIterable {
    /// Human-readable lines.
    case text
    /// One JSON object per line.
    case json
}

/// A `host:port` to listen on.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A secret value (Pusher app secret, MQTT password, encryption key): never printed.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself; read it only where it is used.
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

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

    public init(
        name: String, pusher: PusherSettings, mqtt: MQTTSettings, reconnect: ReconnectPolicy = .default,
        buffer: BufferSettings = BufferSettings(), rules: [BridgeRule] = [], presence: [PresenceMirrorRule] = [],
        webhooks: BridgeWebhookSettings? = nil, cluster: ClusterSettings? = nil
    ) {
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

/// `[bridge.pusher]`: the Pusher app and how to reach it.
public struct PusherSettings: Sendable, Equatable {
    /// `key` (required).
    public var key: String
    /// `app_id`: required when a rule publishes through the HTTP API.
    public var appID: String?
    /// `secret` or `secret_file`: signs private/presence auth and HTTP API calls.
    public var secret: Secret?
    /// `cluster` (default `mt1` when no `host` is set).
    public var cluster: String?
    /// WebSocket host: `host`, else `ws-<cluster>.pusher.com`.
    public var host: String
    /// WebSocket port: `port`, else 443 with TLS, 80 without.
    public var port: Int
    /// `tls`, default true.
    public var useTLS: Bool
    /// HTTP API host: `rest_host`, else `host` when set, else `api-<cluster>.pusher.com`.
    public var restHost: String
    /// HTTP API port: `rest_port`, else `port`.
    public var restPort: Int
    /// `ca_file`: extra trust root (must exist).
    public var caFile: String?
    /// `auth_endpoint`: signs private/presence subscriptions instead of `secret`.
    public var authEndpoint: String?
    /// `auth_headers`, sent to the auth endpoint.
    public var authHeaders: [String: String]
    /// `activity_timeout`, default 120 s; the client uses min(this, the server's).
    public var activityTimeout: Duration
    /// `pong_timeout`, default 30 s.
    public var pongTimeout: Duration
    /// `encryption_master_key_base64` (or `_file`): 32 bytes, for `private-encrypted-` channels.
    public var encryptionMasterKey: Secret?
    /// `user_id`: the bridge's presence identity when signing with the secret; defaults to
    /// `pusher-mqtt-bridge-<bridge>` unless `auth_endpoint` is set (then the endpoint chooses it).
    public var userID: String?
    /// `user_info` as JSON text (an inline table in the config).
    public var userInfoJSON: String?
    /// `max_event_bytes`, default 10 KiB: larger event data is dead-lettered (docs/contract.md §5.2).
    public var maxEventBytes: Int
    /// `api_lanes`, default 8 (1…64): MQTT → Pusher requests in flight at once; a channel always uses one lane (docs/contract.md §5.2).
    public var apiLanes = 8

    public init(
        key: String, appID: String? = nil, secret: Secret? = nil, cluster: String? = "mt1", host: String = "ws-mt1.pusher.com",
        port: Int = 443, useTLS: Bool = true, restHost: String = "api-mt1.pusher.com", restPort: Int = 443, caFile: String? = nil,
        authEndpoint: String? = nil, authHeaders: [String: String] = [:], activityTimeout: Duration = .seconds(120),
        pongTimeout: Duration = .seconds(30), encryptionMasterKey: Secret? = nil, userID: String? = nil,
        userInfoJSON: String? = nil, maxEventBytes: Int = 10 * 1024
    ) {
        self.key = key
        self.appID = appID
        self.secret = secret
        self.cluster = cluster
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.restHost = restHost
        self.restPort = restPort
        self.caFile = caFile
        self.authEndpoint = authEndpoint
        self.authHeaders = authHeaders
        self.activityTimeout = activityTimeout
        self.pongTimeout = pongTimeout
        self.encryptionMasterKey = encryptionMasterKey
        self.userID = userID
        self.userInfoJSON = userInfoJSON
        self.maxEventBytes = maxEventBytes
    }
}

/// `[bridge.mqtt]`: the broker and the session.
public struct MQTTSettings: Sendable, Equatable {
    /// `host`, default `localhost`.
    public var host: String
    /// `port`, default 1883 (8883 with TLS).
    public var port: Int
    /// `tls`, default false.
    public var useTLS: Bool
    /// `ca_file` (must exist).
    public var caFile: String?
    /// `cert_file` (must exist; needs `key_file`).
    public var certFile: String?
    /// `key_file` (must exist; needs `cert_file`).
    public var keyFile: String?
    /// `tls_insecure`, default false: skip host name verification.
    public var tlsInsecure: Bool
    /// `client_id`, default `pusher-mqtt-bridge-<bridge>`; unique across bridges.
    public var clientID: String
    /// `username`.
    public var username: String?
    /// `password` or `password_file`.
    public var password: Secret?
    /// `protocol`, default 5.
    public var protocolVersion: MQTTProtocolVersion
    /// `clean_session`, default false (persistent session).
    public var cleanSession: Bool
    /// `keepalive`, default 30 s.
    public var keepalive: Duration
    /// `session_expiry`, default 1 h: the MQTT 5 Session Expiry Interval sent on CONNECT. MQTT 5
    /// has no persistent session without it (docs/mqtt-notes.md §4); ignored with protocol 4.
    public var sessionExpiry: Duration
    /// `status_topic`, default `pusher-mqtt-bridge/<bridge>/status`.
    public var statusTopic: String
    /// `dead_letter_topic`: where undeliverable messages go; `nil` = only count and log.
    public var deadLetterTopic: String?

    public init(
        host: String = "localhost", port: Int = 1883, useTLS: Bool = false, caFile: String? = nil, certFile: String? = nil,
        keyFile: String? = nil, tlsInsecure: Bool = false, clientID: String, username: String? = nil, password: Secret? = nil,
        protocolVersion: MQTTProtocolVersion = .v5, cleanSession: Bool = false, keepalive: Duration = .seconds(30),
        sessionExpiry: Duration = .seconds(3600), statusTopic: String, deadLetterTopic: String? = nil
    ) {
        self.host = host
        self.port = port
        self.useTLS = useTLS
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.tlsInsecure = tlsInsecure
        self.clientID = clientID
        self.username = username
        self.password = password
        self.protocolVersion = protocolVersion
        self.cleanSession = cleanSession
        self.keepalive = keepalive
        self.sessionExpiry = sessionExpiry
        self.statusTopic = statusTopic
        self.deadLetterTopic = deadLetterTopic
    }
}

/// What to do when a full buffer receives another message (docs/contract.md §4 `[bridge.buffer] overflow`, §7.6).
public enum BufferOverflowPolicy: String, Sendable, Equatable, CaseIterable {
    /// Make room by dropping the oldest buffered messages: the freshest data wins (dashboards).
    case dropOldest = "drop-oldest"
    /// Keep what is buffered and drop the incoming message: the earliest data wins (audit trails).
    case dropNewest = "drop-newest"
    /// Drop nothing: the producer waits for room. For MQTT → Pusher the bridge then stops reading
    /// from the broker, whose persistent session holds the rest (docs/contract.md §7.6).
    case backpressure
}

/// `[bridge.buffer]`: bounds of the per-direction buffer while the far side is down.
public struct BufferSettings: Sendable, Equatable {
    /// `max_messages`, default 100,000.
    public var maxMessages: Int
    /// `max_bytes`, default 64 MiB.
    public var maxBytes: Int
    /// `overflow` as the file says it; `nil` when the key is absent (then each direction takes
    /// its default, see ``BridgeSettings/mqttToPusherOverflow``).
    public var overflowSetting: BufferOverflowPolicy?
    /// `persist`, default true: spool to `state_dir`.
    public var persist: Bool

    /// `overflow` as written, `drop-oldest` when absent.
    public var overflow: BufferOverflowPolicy {
        get { overflowSetting ?? .dropOldest }
        set { overflowSetting = newValue }
    }

    public init(
        maxMessages: Int = 100_000, maxBytes: Int = 64 * 1024 * 1024, overflow: BufferOverflowPolicy? = nil, persist: Bool = true
    ) {
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
        self.overflowSetting = overflow
        self.persist = persist
    }
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

/// A `[[bridge.presence]]`: members of a presence channel → retained MQTT messages (docs/contract.md §5.3),
/// or, with a `channel_prefix`, of every room found under it, each under its own topic (§7.1).
public struct PresenceMirrorRule: Sendable, Equatable {
    /// A `presence-` channel; with ``discovery``, the `channel_prefix`.
    public var channel: String
    /// The base topic `T`: members go to `T/members/<user_id>`, the count to `T/count`. With a
    /// prefix, `{suffix}` (one whole level) stands for the room's name after the prefix.
    public var topic: String
    /// Publish QoS, default 1.
    public var qos: Int
    /// `channel_prefix` and its keys; nil for one exact channel.
    public var discovery: ChannelDiscoverySettings?

    /// `{suffix}` as written in a prefix mirror's topic.
    public static let suffixPlaceholder = "{suffix}"

    /// A mirror of `channel` (with `discovery`: of every room under the prefix `channel`) under `topic`.
    public init(channel: String, topic: String, qos: Int = 1, discovery: ChannelDiscoverySettings? = nil) {
        self.channel = channel
        self.topic = topic
        self.qos = qos
        self.discovery = discovery
    }

    /// The `channel_prefix`, or nil for a mirror of one exact channel.
    public var channelPrefix: String? { discovery == nil ? nil : channel }

    /// The discovery rule name of a prefix mirror (metric label `rule`, logs): `presence:<prefix>`.
    public var discoveryName: String { "presence:" + channel }

    /// `T/members/+` (`T` with `{suffix}` as `+` for a prefix mirror): where retained members (and ghosts) are found.
    public var retainedMembersFilter: String {
        let base = discovery == nil ? topic : topic.replacing(Self.suffixPlaceholder, with: "+")
        return base + "/members/+"
    }

    /// The mirror of one room found under this prefix mirror: channel `room`, topic with
    /// `{suffix}` filled in, escaped like any topic value (docs/contract.md §5.1). Nil when this
    /// is not a prefix mirror or `room` is not under its prefix.
    public func room(_ room: String) -> PresenceMirrorRule? {
        guard discovery != nil, let suffix = ChannelDiscoverySettings.suffix(of: room, under: channel) else { return nil }
        var escaped = ""
        TopicLevelEscaping.append(suffix, to: &escaped)
        return PresenceMirrorRule(channel: room, topic: topic.replacing(Self.suffixPlaceholder, with: escaped), qos: qos)
    }
}

/// What the daemon subscribes to on the broker, and which rules or mirrors need it.
///
/// `subscription` says what the configuration asks for; `BridgeStateMachine` fits No Local and
/// Retain Handling to the protocol version before it goes to the broker. With MQTT 3.1.1 a
/// Retain Handling of `.never` cannot be sent: the rule table drops messages with the retain flag
/// set instead.
public struct BridgeSubscription: Sendable, Equatable {
    /// The filter and its options.
    public var subscription: MQTTSubscription
    /// Which rules or mirrors need this subscription (for logs and `check`).
    public var purposes: [String]

    public init(_ subscription: MQTTSubscription, purposes: [String] = []) {
        self.subscription = subscription
        self.purposes = purposes
    }

    /// The topic filter.
    public var filter: String { subscription.filter }
}
