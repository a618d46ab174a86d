import Backoff
import MQTTVocabulary
import PusherProtocol

/// The text `pusher-mqtt-bridge check` prints for a valid config: per bridge, where it connects,
/// what it subscribes to, and the compiled rule table (docs/contract.md §3). Secrets are never shown.
public enum CheckReport {
    /// The whole report for `configuration`, read from `file`.
    public static func render(_ configuration: BridgeConfiguration, file: String) -> String {
        var lines: [String] = []
        let ruleCount = configuration.bridges.reduce(0) { $0 + $1.rules.count }
        let mirrorCount = configuration.bridges.reduce(0) { $0 + $1.presence.count }
        lines.append(
            "\(file): valid — \(plural(configuration.bridges.count, "bridge")), \(plural(ruleCount, "rule")), "
                + "\(plural(mirrorCount, "presence mirror"))")
        let daemon = configuration.daemon
        lines.append(
            "daemon: log \(daemon.logLevel.rawValue)/\(daemon.logFormat.rawValue), metrics \(daemon.metrics?.description ?? "off"), "
                + "state_dir \(daemon.stateDirectory), shutdown_grace \(format(daemon.shutdownGrace))"
                + (daemon.webhooks.map { ", webhooks \($0)" } ?? "")
                + (daemon.homeAssistant.enabled ? ", Home Assistant discovery under \(daemon.homeAssistant.prefix)/" : ""))
        for bridge in configuration.bridges {
            lines.append("")
            lines.append(contentsOf: render(bridge))
            if daemon.homeAssistant.enabled {
                let device = HomeAssistantDevice(bridge: bridge, prefix: daemon.homeAssistant.prefix)
                lines.append(
                    "  homeassistant: device \(device.nodeID), \(device.entities.count) entities "
                        + "(\(device.prefix)/<component>/\(device.nodeID)/<entity>/config), state \(device.stateTopic)")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// The section for one bridge.
    public static func render(_ bridge: BridgeSettings) -> [String] {
        var lines: [String] = []
        let pusher = bridge.pusher
        let mqtt = bridge.mqtt
        lines.append("bridge \(bridge.name)")
        var auth: [String] = []
        if pusher.secret != nil { auth.append("secret") }
        if pusher.authEndpoint != nil { auth.append("auth endpoint \(pusher.authEndpoint ?? "")") }
        if pusher.encryptionMasterKey != nil { auth.append("encryption master key") }
        lines.append(
            "  pusher  \(pusher.useTLS ? "wss" : "ws")://\(pusher.host):\(pusher.port)/app/\(pusher.key)"
                + (pusher.appID.map { ", app_id \($0)" } ?? "")
                + ", HTTP API \(pusher.useTLS ? "https" : "http")://\(pusher.restHost):\(pusher.restPort)"
                + ", auth: \(auth.isEmpty ? "none (public channels only)" : auth.joined(separator: ", "))"
                + ", max_event_bytes \(pusher.maxEventBytes), api_lanes \(pusher.apiLanes)"
                + (pusher.drainRate.map { ", backlog drained at most \(Self.rate($0))" } ?? ""))
        if pusher.signIn {
            let by = pusher.userAuthEndpoint.map { "user auth endpoint \($0)" } ?? "the secret"
            lines.append(
                "  pusher  signs in as \(pusher.userAuthEndpoint == nil ? pusher.userID ?? "" : "the endpoint's user") (signed with \(by))"
                    + (pusher.watchlist.isEmpty ? "" : ", watchlist of \(pusher.watchlist.count)")
                    + (bridge.users.map { ", users -> \($0.topic)/<id>/online and \($0.topic)/<id>/events/<event>" } ?? ""))
        }
        if pusher.connections > 1 {
            // Pusher counts a message per subscriber it reaches: every connection is one.
            lines.append(
                "  pusher  \(pusher.connections) connections, events merged: Pusher counts each Pusher → MQTT event "
                    + "\(pusher.connections)× (\(pusher.connections) messages per event), and \(pusher.connections) connections "
                    + "against the app's connection limit")
        }
        lines.append(
            "  mqtt    \(mqtt.useTLS ? "mqtts" : "mqtt")://\(mqtt.host):\(mqtt.port), MQTT \(mqtt.protocolVersion == .v5 ? "5" : "3.1.1"), "
                + "client_id \(mqtt.clientID), \(mqtt.cleanSession ? "clean session" : "persistent session"), "
                + "status \(mqtt.statusTopic)" + (mqtt.deadLetterTopic.map { ", dead letters \($0)" } ?? "")
                + (mqtt.drainRate.map { ", backlog drained at most \(Self.rate($0))" } ?? "")
                + (mqtt.failover.isEmpty ? "" : "; failover to \(mqtt.failover.map(\.description).joined(separator: ", ")) in turn"))
        let reconnect = bridge.reconnect
        lines.append(
            "  reconnect \(format(reconnect.initialDelay))…\(format(reconnect.maxDelay)) ×\(reconnect.multiplier) ±\(Int(reconnect.jitter * 100))%; "
                + "buffer \(bridge.buffer.maxMessages) messages / \(bridge.buffer.maxBytes) bytes per direction, "
                + "pusher->mqtt \(bridge.pusherToMQTTOverflow.rawValue), mqtt->pusher \(bridge.mqttToPusherOverflow.rawValue)"
                + "\(bridge.buffer.persist ? ", spooled" : ", memory only")")
        if let cluster = bridge.cluster { lines.append(describe(cluster, in: bridge)) }
        let channels = bridge.pusherChannels
        lines.append("  pusher channels: " + (channels.isEmpty ? "none" : channels.joined(separator: ", ")))
        lines += discoveryLines(bridge)
        if let webhooks = bridge.webhooks {
            let events = PusherWebhookKind.allCases.filter { webhooks.events.contains($0) }.map(\.rawValue)
            lines.append(
                "  webhooks: POST /webhooks/\(bridge.name) -> \(webhooks.topicPrefix)/channels/{channel}/..., qos \(webhooks.qos), "
                    + "events \(events.count == PusherWebhookKind.allCases.count ? "all" : events.joined(separator: ","))")
        }
        let subscriptions = bridge.mqttSubscriptions
        lines.append(
            "  mqtt subscriptions: "
                + (subscriptions.isEmpty
                    ? "none"
                    : subscriptions.map { needed in
                        let subscription = needed.subscription
                        var flags = ["qos \(subscription.qos.rawValue)"]
                        if subscription.noLocal { flags.append("no_local") }
                        flags.append(subscription.retainHandling == .sendAlways ? "retained: yes" : "retained: no")
                        return "\(subscription.filter) (\(flags.joined(separator: ", ")))"
                    }.joined(separator: ", ")))
        var table = TextTable(header: ["RULE", "DIRECTION", "FROM", "TO", "QOS", "RETAIN", "PAYLOAD"])
        for rule in bridge.rules {
            switch rule {
            case .pusherToMQTT(let rule):
                let events: String
                switch rule.events {
                case .all: events = "*"
                case .named(let names): events = names.joined(separator: ",")
                }
                table.rows.append([
                    rule.name, "pusher -> mqtt", "\(rule.discovery == nil ? "channel" : "channel_prefix") \(rule.channel) events \(events)",
                    "topic \(rule.topic.source)", "\(rule.qos)",
                    rule.retain ? "yes" : "no", rule.payload.description,
                ])
            case .mqttToPusher(let rule):
                table.rows.append([
                    rule.name, "mqtt -> pusher", "topic \(rule.filter.text)",
                    Self.target(of: rule), "\(rule.qos)",
                    rule.forwardRetained ? "forwarded" : "not forwarded", rule.payload.description,
                ])
            }
        }
        for mirror in bridge.presence {
            table.rows.append([
                "(presence)", "presence -> mqtt", "\(mirror.discovery == nil ? "channel" : "channel_prefix") \(mirror.channel)",
                "topic \(mirror.topic)/members/{user_id}, \(mirror.topic)/count", "\(mirror.qos)", "yes", "user_info",
            ])
        }
        if table.rows.isEmpty {
            lines.append("  no rules")
        } else {
            lines.append("")
            lines.append(table.render(indent: "  "))
        }
        for rule in bridge.rules {
            if let line = describe(rule.conditions) { lines.append("  rule \(rule.name): \(line)") }
        }
        return lines
    }

    /// One line per `channel_prefix` rule or mirror (docs/contract.md §7.1): what it polls, how
    /// often, and its limits.
    static func discoveryLines(_ bridge: BridgeSettings) -> [String] {
        var found: [(String, String, ChannelDiscoverySettings)] = bridge.pusherToMQTTRules.compactMap { rule in
            rule.discovery.map { ("rule \(rule.name)", rule.channel, $0) }
        }
        found += bridge.presence.compactMap { mirror in mirror.discovery.map { ("presence mirror", mirror.channel, $0) } }
        return found.map { owner, prefix, settings in
            let info = ChannelName(prefix).kind == .presence ? "user_count" : "subscription_count"
            return "  discovery: \(owner) polls channels under \"\(prefix)\" every \(format(settings.interval)) (info=\(info)), "
                + "holds at most \(settings.maxChannels), leaves a channel without counts after "
                + "\(format(settings.idleTimeout)) without events"
        }
    }

    /// `cluster group factory, instance a: …` (docs/contract.md §7.4): what the membership uses and
    /// what this instance derives.
    static func describe(_ cluster: ClusterSettings, in bridge: BridgeSettings) -> String {
        "  cluster group \(cluster.group), instance \(cluster.instance): "
            + "membership \(cluster.membershipTopic)/{members,heartbeat,held}/<instance> and …/discovered/<rule>, "
            + "heartbeat \(format(cluster.heartbeatInterval)), member_timeout \(format(cluster.memberTimeout)), "
            + "join_settle \(format(cluster.joinSettle)), handover \(format(cluster.handoverTimeout)); "
            + "this instance: client_id \(bridge.effectiveMQTTClientID), status \(bridge.effectiveStatusTopic), "
            + "state in <state_dir>/\(cluster.instance); channels split by rendezvous hashing "
            + "over the live members; MQTT -> Pusher " + describe(cluster.mqttToPusher, standby: cluster)
    }

    /// How the members share the MQTT → Pusher rules' messages (`mqtt_to_pusher`).
    static func describe(_ mode: ClusterMQTTToPusher, standby cluster: ClusterSettings) -> String {
        switch mode {
        case .shared:
            "shared: each rule filter as $share/\(cluster.group)/<filter>, one member per message"
        case .partition:
            "partition: every member subscribes each rule filter and sends the messages of the channels it owns; "
                + "the others kept \(format(cluster.memberTimeout + cluster.handoverTimeout)), sent when their channel "
                + "becomes this member's"
        }
    }

    /// `where …; throttle 1s per target; on_change` (docs/contract.md §7.3), or nil when the rule has none.
    static func describe(_ conditions: PayloadConditions) -> String? {
        var parts: [String] = []
        if let condition = conditions.condition { parts.append("where \(condition.source)") }
        if let throttle = conditions.throttle { parts.append("throttle \(format(throttle)) per target (latest wins)") }
        if conditions.onChange { parts.append("on_change (repeats of the last payload per target dropped)") }
        if conditions.shapesRate { parts.append("at most \(conditions.maxTargets) targets") }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    static func plural(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }

    /// `500ms`, `30s`, `2m`, `1h30m`: the shortest exact form.
    static func format(_ duration: Duration) -> String {
        let milliseconds = Int64(duration.seconds * 1000)
        if milliseconds % 1000 != 0 { return "\(milliseconds)ms" }
        var seconds = milliseconds / 1000
        if seconds == 0 { return "0s" }
        var text = ""
        if seconds >= 3600 {
            text += "\(seconds / 3600)h"
            seconds %= 3600
        }
        if seconds >= 60 {
            text += "\(seconds / 60)m"
            seconds %= 60
        }
        if seconds > 0 { text += "\(seconds)s" }
        return text
    }

    /// The target column of an MQTT → Pusher rule.
    static func target(of rule: MQTTToPusherRule) -> String {
        switch rule.target {
        case .channel: "channel \(rule.channel.source) event \(rule.event.source) via \(rule.via.rawValue)"
        case .user: "to_user \(rule.channel.source) event \(rule.event.source)"
        case .terminateUser: "terminate_user \(rule.channel.source)"
        }
    }

    /// A `drain_rate` as written back: `500/s`, `0.5/s`.
    static func rate(_ perSecond: Double) -> String {
        perSecond == perSecond.rounded() ? "\(Int(perSecond))/s" : "\(perSecond)/s"
    }
}
