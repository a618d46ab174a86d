import BridgeCore
import Durability

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What `pusher-mqtt-bridge dead-letters` does without the daemon (docs/contract.md §8.3): reads
/// each bridge's store as the config file places it, prints letters, explains what a redrive would
/// do, purges when no daemon holds the store. Kept here, not in the executable, so tests reach it.
public enum DeadLetterFiles {
    /// One letter as the command line shows it.
    public struct Letter: Sendable, Equatable {
        public var id: DeadLetterID
        public var stored: StoredDeadLetter
    }

    /// The store directory of `bridge` under `configuration`'s state directory (per instance in a cluster).
    public static func directory(of bridge: BridgeSettings, in configuration: BridgeConfiguration) -> String {
        DeadLetterStore.directory(
            stateDirectory: bridge.effectiveStateDirectory(daemonStateDirectory: configuration.daemon.stateDirectory),
            bridge: bridge.name)
    }

    /// Every kept letter of the bridges (all, or `only`), oldest first per bridge, and the damaged
    /// records skipped while reading. Reads without the store's lock: also while the daemon runs.
    public static func read(
        _ configuration: BridgeConfiguration, only: String? = nil
    ) throws -> (letters: [Letter], skipped: Int) {
        var letters: [Letter] = []
        var skipped = 0
        for bridge in configuration.bridges where only == nil || bridge.name == only {
            let (stored, recovery) = try DeadLetterStore.read(directory: directory(of: bridge, in: configuration))
            skipped += recovery.total
            letters += stored.map { Letter(id: DeadLetterID(bridge: bridge.name, number: $0.id), stored: $0) }
        }
        return (letters, skipped)
    }

    /// `list --json`: one JSON object, no newline.
    public static func jsonLine(_ letter: Letter) -> String {
        let stored = letter.stored
        var out: [UInt8] = Array("{\"id\":".utf8)
        JSONText.appendString(letter.id.description, to: &out)
        func field(_ name: String, _ value: String) {
            out.append(contentsOf: Array(",\"\(name)\":".utf8))
            JSONText.appendString(value, to: &out)
        }
        field("bridge", stored.bridge)
        field("rule", stored.rule)
        field("code", stored.code)
        field("reason", stored.reason)
        field("time", UTCTimestamp(millisecondsSince1970: stored.timeMillis).rfc3339)
        switch stored.message {
        case .mqtt(let topic, let qos, let retain):
            field("direction", MessageDirection.mqttToPusher.rawValue)
            field("topic", topic)
            out.append(contentsOf: Array(",\"qos\":\(qos),\"retain\":\(retain)".utf8))
        case .pusher(let channel, let event, let userID):
            field("direction", MessageDirection.pusherToMQTT.rawValue)
            field("channel", channel)
            field("event", event)
            if let userID { field("user_id", userID) }
        case .toPusher(let channel, let event):
            field("direction", MessageDirection.mqttToPusher.rawValue)
            field("channel", channel)
            field("event", event)
        }
        if let text = String(validating: stored.payload, as: UTF8.self) {
            field("payload", text)
        } else {
            field("payload_base64", Base64.encode(stored.payload))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `list`: one line a letter.
    public static func summaryLine(_ letter: Letter) -> String {
        "\(letter.id)  \(UTCTimestamp(millisecondsSince1970: letter.stored.timeMillis).rfc3339)  rule \(letter.stored.rule)  "
            + "\(letter.stored.code)  \(source(letter.stored))"
    }

    /// `show`: every field, the payload as text (or base64).
    public static func details(_ letter: Letter) -> String {
        let stored = letter.stored
        var lines = [
            "id:      \(letter.id)", "bridge:  \(stored.bridge)", "rule:    \(stored.rule)", "code:    \(stored.code)",
            "reason:  \(stored.reason)", "time:    \(UTCTimestamp(millisecondsSince1970: stored.timeMillis).rfc3339)",
            "source:  \(source(stored))",
        ]
        if let text = String(validating: stored.payload, as: UTF8.self) {
            lines.append("payload (\(stored.payload.count) bytes): \(text)")
        } else {
            lines.append("payload (\(stored.payload.count) bytes, base64): \(Base64.encode(stored.payload))")
        }
        return lines.joined(separator: "\n")
    }

    static func source(_ stored: StoredDeadLetter) -> String {
        switch stored.message {
        case .mqtt(let topic, let qos, let retain): "mqtt topic \"\(topic)\" (qos \(qos)\(retain ? ", retained" : ""))"
        case .pusher(let channel, let event, _): "pusher channel \"\(channel)\" event \"\(event)\""
        case .toPusher(let channel, let event): "event to pusher channel \"\(channel)\" event \"\(event)\""
        }
    }

    /// `redrive --dry-run`: what the letter would become with the rules of `configuration` (the
    /// `route` explanation, for the letter's bridge).
    public static func dryRun(_ letter: Letter, in configuration: BridgeConfiguration, now: UTCTimestamp) -> String {
        let stored = letter.stored
        let header = "letter \(letter.id) (\(stored.code), rule \(stored.rule)):"
        let body: String
        switch stored.message {
        case .mqtt(let topic, let qos, let retain):
            body = RouteExplanation.explain(
                topic: topic, payload: stored.payload, qos: qos, retain: retain, in: configuration, bridge: stored.bridge, receivedAt: now)
        case .pusher(let channel, let event, let userID):
            body = RouteExplanation.explain(
                channel: channel, event: event, data: String(decoding: stored.payload, as: UTF8.self), userID: userID, in: configuration,
                bridge: stored.bridge, receivedAt: now)
        case .toPusher(let channel, let event):
            let exists = configuration.bridge(named: stored.bridge)?.mqttToPusherRules.contains { $0.name == stored.rule } ?? false
            body =
                exists
                ? "sent again to pusher channel \"\(channel)\" event \"\(event)\" as it was (rule \(stored.rule) still exists)"
                : "rule \(stored.rule) no longer exists in bridge \(stored.bridge): no rule takes it; it stays kept"
        }
        return header + "\n" + body.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n")
    }

    /// Whether a letter is in `selection`.
    public static func matches(_ letter: Letter, _ selection: DeadLetterSelection) -> Bool {
        switch selection {
        case .ids(let ids): ids.contains(letter.id)
        case .all(let bridge): bridge == nil || bridge == letter.id.bridge
        case .code(let code, let bridge): letter.stored.code == code && (bridge == nil || bridge == letter.id.bridge)
        }
    }

    /// `purge` with no daemon holding the stores: removes the selected letters under each store's
    /// lock. Returns nil when a store is held (a running daemon: purge through its socket instead).
    public static func purge(
        _ selection: DeadLetterSelection, in configuration: BridgeConfiguration
    ) throws -> (removed: Int, missing: [String])? {
        var removed = 0
        var missing: [String] = []
        var stores: [(String, DeadLetterStore)] = []
        var withoutStore: Set<String> = []
        for bridge in configuration.bridges {
            let directory = directory(of: bridge, in: configuration)
            // A bridge that never kept a letter has no store: nothing to create for a purge.
            guard access(DeadLetterStore.logPath(directory), F_OK) == 0 else {
                withoutStore.insert(bridge.name)
                continue
            }
            do {
                stores.append((bridge.name, try DeadLetterStore(directory: directory, maxLetters: Int.max)))
            } catch let error as SpoolError where error.isLocked {
                return nil
            }
        }
        for (bridge, store) in stores {
            switch selection {
            case .ids(let ids):
                let wanted = ids.filter { $0.bridge == bridge }.map(\.number)
                let gone = try store.remove(wanted)
                removed += gone.count
                missing += wanted.filter { !gone.contains($0) }.map { "\(bridge):\($0)" }
            case .all(let only), .code(_, let only):
                guard only == nil || only == bridge else { continue }
                var chosen = store.ids
                if case .code(let code, _) = selection { chosen = try store.letters().filter { $0.code == code }.map(\.id) }
                removed += try store.remove(chosen).count
            }
            try store.synchronize()
        }
        if case .ids(let ids) = selection {
            let names = Set(configuration.bridges.map(\.name))
            missing += ids.filter { !names.contains($0.bridge) || withoutStore.contains($0.bridge) }.map(\.description)
        }
        return (removed, missing)
    }
}
