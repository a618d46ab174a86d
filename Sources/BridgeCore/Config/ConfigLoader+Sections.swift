import Backoff
import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol
import TOMLKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension LoadContext {
    // Every table's keys come from the one table of keys (ConfigKey.swift), which also generates
    // docs/configuration.md.
    static let rootKeys = ["daemon", "bridge"]
    static let daemonKeys = ConfigKey.names(in: .daemon)
    static let bridgeKeys = ConfigKey.names(in: .bridge)
    static let pusherKeys = ConfigKey.names(in: .pusher)
    static let mqttKeys = ConfigKey.names(in: .mqtt)
    static let reconnectKeys = ConfigKey.names(in: .reconnect)
    static let bufferKeys = ConfigKey.names(in: .buffer)
    static let pusherRuleKeys = ConfigKey.names(in: .pusherRule)
    static let mqttRuleKeys = ConfigKey.names(in: .mqttRule)
    static let presenceKeys = ConfigKey.names(in: .presence)

    func readRoot(_ root: TOMLTable) -> BridgeConfiguration {
        let reader = TableReader(table: root, path: .root, context: self)
        reader.rejectUnknownKeys(allowed: Self.rootKeys)
        let daemonReader = reader.subtable("daemon")
        let daemon = daemonReader.map(readDaemon) ?? DaemonSettings()
        // A bad listener address is reported once, at its own key, not again at each bridge.
        let listenerWritten = daemonReader.map { $0.has("webhooks") && $0.table["webhooks"]?.string != "" } ?? false
        var bridges: [BridgeSettings] = []
        if let tables = reader.tableArray("bridge") {
            var names: [String: Int] = [:]
            var clientIDs: [String: String] = [:]
            for (offset, table) in tables.enumerated() {
                let rawName = table["name"]?.string
                let usableName = rawName.flatMap { Self.isBridgeName($0) ? $0 : nil }
                let shownName = usableName.flatMap { names[$0] == nil ? $0 : nil }
                let path = ConfigKeyPath(display: "bridge", lookup: "bridge").element(offset + 1, name: shownName)
                let bridgeReader = TableReader(table: table, path: path, context: self)
                guard let bridge = readBridge(bridgeReader, index: offset + 1) else { continue }
                checkWebhooks(bridge, daemon: daemon, daemonListenerWritten: listenerWritten, path: path)
                checkHomeAssistantTopics(bridge, daemon: daemon, path: path)
                if let first = names[bridge.name] {
                    report(path.key("name"), "duplicate bridge name \"\(bridge.name)\" (bridge #\(first) has it too)")
                } else {
                    names[bridge.name] = offset + 1
                }
                if let other = clientIDs[bridge.mqtt.clientID] {
                    report(
                        path.key("mqtt").key("client_id"),
                        "client_id \"\(bridge.mqtt.clientID)\" is also used by bridge \(other); two clients with one id keep disconnecting each other"
                    )
                } else {
                    clientIDs[bridge.mqtt.clientID] = bridge.name
                }
                bridges.append(bridge)
            }
        }
        if root["bridge"] == nil {
            report(.root.key("bridge"), "no [[bridge]] is configured; at least one is required")
        }
        return BridgeConfiguration(daemon: daemon, bridges: bridges)
    }

    static func isBridgeName(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    static func isRuleName(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    func readDaemon(_ reader: TableReader) -> DaemonSettings {
        reader.rejectUnknownKeys(allowed: Self.daemonKeys)
        var daemon = DaemonSettings()
        if let level = reader.choice("log_level", LogLevelSetting.self) { daemon.logLevel = level }
        if let format = reader.choice("log_format", LogFormat.self) { daemon.logFormat = format }
        if let metrics = reader.string("metrics") {
            if metrics.isEmpty {
                daemon.metrics = nil
            } else if let address = ListenAddress(metrics) {
                daemon.metrics = address
            } else {
                report(
                    reader.path.key("metrics"),
                    "expected \"host:port\" with a port 1…65535, or \"\" to turn metrics off; found \"\(metrics)\"")
            }
        }
        if let directory = reader.nonEmptyString("state_dir") { daemon.stateDirectory = resolve(directory, against: configDirectory) }
        if let grace = reader.duration("shutdown_grace", allowZero: true) { daemon.shutdownGrace = grace }
        readWebhookListener(reader, into: &daemon)
        if let socket = reader.string("control_socket") {
            if socket.isEmpty {
                daemon.controlSocket = .off
            } else if socket.utf8.contains(0) {
                report(reader.path.key("control_socket"), "must not contain a NUL byte")
            } else {
                daemon.controlSocket = .path(resolve(socket, against: configDirectory))
            }
        }
        readHomeAssistant(reader, into: &daemon)
        return daemon
    }

    func readBridge(_ reader: TableReader, index: Int) -> BridgeSettings? {
        reader.rejectUnknownKeys(allowed: Self.bridgeKeys)
        let name = reader.string("name", required: true)
        if let name, !Self.isBridgeName(name) {
            report(reader.path.key("name"), "\"\(name)\" is not a valid bridge name; use lower-case letters, digits, '_' and '-'")
        }
        let bridgeName = name.flatMap { Self.isBridgeName($0) ? $0 : nil } ?? "bridge\(index)"

        let pusherReader = reader.subtable("pusher")
        if pusherReader == nil, !reader.has("pusher") { reader.missing("pusher") }
        let mqttReader = reader.subtable("mqtt")
        let pusher = pusherReader.flatMap(readPusher)
        let mqtt = readMQTT(mqttReader ?? TableReader(table: TOMLTable(), path: reader.path.key("mqtt"), context: self), bridge: bridgeName)
        let reconnect = reader.subtable("reconnect").map(readReconnect) ?? .default
        let buffer = reader.subtable("buffer").map(readBuffer) ?? BufferSettings()
        let webhooks = reader.subtable("webhooks").flatMap(readWebhooks)
        let cluster = reader.subtable("cluster").flatMap { readCluster($0, mqtt: mqtt, mqttPath: reader.path.key("mqtt")) }
        let users = reader.subtable("users").flatMap(readUsers)
        let maxDeadLetters = reader.int("max_dead_letters", in: 1...10_000_000)

        var rules: [BridgeRule] = []
        var ruleNames: Set<String> = []
        for (offset, table) in (reader.tableArray("rule") ?? []).enumerated() {
            let rawName = table["name"]?.string
            let shown = rawName.flatMap { Self.isRuleName($0) && !ruleNames.contains($0) ? $0 : nil }
            let ruleReader = TableReader(table: table, path: reader.path.key("rule").element(offset + 1, name: shown), context: self)
            guard let rule = readRule(ruleReader, bridge: bridgeName) else { continue }
            if !ruleNames.insert(rule.name).inserted {
                report(ruleReader.path.key("name"), "duplicate rule name \"\(rule.name)\" in bridge \(bridgeName)")
            }
            rules.append(rule)
        }
        var presence: [PresenceMirrorRule] = []
        for (offset, table) in (reader.tableArray("presence") ?? []).enumerated() {
            let presenceReader = TableReader(table: table, path: reader.path.key("presence").element(offset + 1, name: nil), context: self)
            guard let mirror = readPresence(presenceReader) else { continue }
            if presence.contains(where: { $0.channel == mirror.channel && ($0.discovery == nil) == (mirror.discovery == nil) }) {
                let key = mirror.discovery == nil ? "channel" : "channel_prefix"
                report(presenceReader.path.key(key), "\(key) \"\(mirror.channel)\" is already mirrored by another [[bridge.presence]]")
            }
            if presence.contains(where: { $0.topic == mirror.topic }) {
                report(presenceReader.path.key("topic"), "topic \"\(mirror.topic)\" is already used by another [[bridge.presence]]")
            }
            presence.append(mirror)
        }

        guard var pusher, let name, Self.isBridgeName(name) else { return nil }
        if pusher.userID == nil, pusher.authEndpoint == nil {
            // Presence subscriptions signed with the secret need an identity in channel_data
            // (docs/pusher-protocol.md §1); with an auth endpoint, the endpoint chooses it.
            pusher.userID = "pusher-mqtt-bridge-\(name)"
        }
        let bridge = BridgeSettings(
            name: name, pusher: pusher, mqtt: mqtt, reconnect: reconnect, buffer: buffer, rules: rules, presence: presence,
            webhooks: webhooks, cluster: cluster, users: users, maxDeadLetters: maxDeadLetters ?? BridgeSettings.defaultMaxDeadLetters)
        checkCredentials(bridge, path: reader.path)
        checkSignIn(bridge, path: reader.path)
        checkDerivedMQTTIdentity(bridge, path: reader.path)
        return bridge
    }

    /// Cross-checks between rules and the Pusher credentials they need (docs/pusher-protocol.md §1 auth, §2 HTTP API).
    func checkCredentials(_ bridge: BridgeSettings, path: ConfigKeyPath) {
        let pusher = bridge.pusher
        let canAuthorize = pusher.secret != nil || pusher.authEndpoint != nil
        /// Discovery polls the signed HTTP API (docs/contract.md §7.1).
        func discoveryNeeds(at keyPath: ConfigKeyPath) {
            if pusher.appID == nil { report(keyPath, "finds channels through the HTTP API, which needs pusher.app_id") }
            if pusher.secret == nil {
                report(keyPath, "finds channels through the HTTP API, which needs pusher.secret (or secret_file) to sign requests")
            }
        }
        func channelNeeds(_ channel: String, at keyPath: ConfigKeyPath) {
            let kind = ChannelName(channel).kind
            if kind.requiresAuth, !canAuthorize {
                report(keyPath, "channel \"\(channel)\" needs authorization: set pusher.secret (or secret_file) or pusher.auth_endpoint")
            }
            if kind == .privateEncrypted, pusher.encryptionMasterKey == nil, pusher.authEndpoint == nil {
                report(keyPath, "channel \"\(channel)\" is encrypted: set pusher.encryption_master_key_base64 (or _file)")
            }
        }
        for (offset, rule) in bridge.rules.enumerated() {
            let rulePath = path.key("rule").element(offset + 1, name: rule.name)
            switch rule {
            case .pusherToMQTT(let rule):
                channelNeeds(rule.channel, at: rulePath.key(rule.discovery == nil ? "channel" : "channel_prefix"))
                if rule.discovery != nil { discoveryNeeds(at: rulePath.key("channel_prefix")) }
            case .mqttToPusher(let rule):
                switch rule.via {
                case .http:
                    if rule.channel.literalPrefix.hasUTF8Prefix("private-encrypted-"), pusher.encryptionMasterKey == nil {
                        report(
                            rulePath.key("channel"),
                            "publishing to encrypted channels needs pusher.encryption_master_key_base64 (or _file): the data must be encrypted before it is sent"
                        )
                    }
                    if pusher.appID == nil {
                        report(rulePath, "publishes into Pusher through the HTTP API, which needs pusher.app_id")
                    }
                    if pusher.secret == nil {
                        report(
                            rulePath,
                            "publishes into Pusher through the HTTP API, which needs pusher.secret (or secret_file) to sign requests")
                    }
                case .clientEvent:
                    channelNeeds(rule.channel.literalText, at: rulePath.key("channel"))
                }
            }
        }
        for (offset, mirror) in bridge.presence.enumerated() {
            let mirrorPath = path.key("presence").element(offset + 1, name: nil)
            channelNeeds(mirror.channel, at: mirrorPath.key(mirror.discovery == nil ? "channel" : "channel_prefix"))
            if mirror.discovery != nil { discoveryNeeds(at: mirrorPath.key("channel_prefix")) }
        }
    }

    func readReconnect(_ reader: TableReader) -> ReconnectPolicy {
        reader.rejectUnknownKeys(allowed: Self.reconnectKeys)
        var policy = ReconnectPolicy.default
        if let initial = reader.duration("initial_delay") { policy.initialDelay = initial }
        if let maximum = reader.duration("max_delay") { policy.maxDelay = maximum }
        if let multiplier = reader.double("multiplier") {
            if multiplier >= 1, multiplier.isFinite {
                policy.multiplier = multiplier
            } else {
                report(reader.path.key("multiplier"), "must be a number ≥ 1, found \(multiplier)")
            }
        }
        if let jitter = reader.double("jitter") {
            if (0...1).contains(jitter) {
                policy.jitter = jitter
            } else {
                report(reader.path.key("jitter"), "must be between 0 and 1, found \(jitter)")
            }
        }
        if let stable = reader.duration("stable_after") { policy.stableAfter = stable }
        for problem in policy.problems {
            report(reader.path, problem)
        }
        return policy
    }

    func readBuffer(_ reader: TableReader) -> BufferSettings {
        reader.rejectUnknownKeys(allowed: Self.bufferKeys)
        var buffer = BufferSettings()
        if let count = reader.int("max_messages", in: 1...100_000_000) { buffer.maxMessages = count }
        if let bytes = reader.size("max_bytes", in: 1024...(1 << 40)) { buffer.maxBytes = bytes }
        if let overflow = reader.choice("overflow", BufferOverflowPolicy.self) { buffer.overflow = overflow }
        if let persist = reader.bool("persist") { buffer.persist = persist }
        return buffer
    }

    func readPresence(_ reader: TableReader) -> PresenceMirrorRule? {
        reader.rejectUnknownKeys(allowed: Self.presenceKeys)
        let selection = readChannelSelection(reader, presence: true)
        var valid = selection != nil
        if let selection, selection.discovery == nil {
            let channel = selection.name
            if let problem = ChannelName.problem(with: channel) {
                report(reader.path.key("channel"), problem)
                valid = false
            } else if ChannelName(channel).kind != .presence {
                report(reader.path.key("channel"), "\"\(channel)\" is not a presence channel (the name must start with \"presence-\")")
                valid = false
            }
        }
        let topic = reader.nonEmptyString("topic", required: true)
        if let topic {
            if let problem = Self.mqttTopicProblem(topic) {
                report(reader.path.key("topic"), problem)
                valid = false
            } else if reader.has("channel_prefix") {
                if let problem = Self.presencePrefixTopicProblem(topic) {
                    report(reader.path.key("topic"), problem)
                    valid = false
                }
            } else if topic.contains("{") {
                let hint = topic.contains("{suffix}") ? " ({suffix} needs channel_prefix)" : ""
                report(reader.path.key("topic"), "presence topics take no placeholders\(hint); members go to \(topic)/members/<user_id>")
                valid = false
            }
            if topic.hasSuffix("/") {
                report(reader.path.key("topic"), "must not end with '/'")
                valid = false
            }
        }
        let qos = reader.qos("qos") ?? 1
        guard valid, let selection, let topic else { return nil }
        return PresenceMirrorRule(channel: selection.name, topic: topic, qos: qos, discovery: selection.discovery)
    }
}
