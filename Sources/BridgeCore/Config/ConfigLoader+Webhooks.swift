/// `[daemon] webhooks` and `[bridge.webhooks]` (docs/contract.md §7.2).
extension LoadContext {
    static let webhookKeys = ConfigKey.names(in: .webhooks)

    /// `[daemon] webhooks = "host:port"`, `""` = off (the default).
    func readWebhookListener(_ reader: TableReader, into daemon: inout DaemonSettings) {
        guard let text = reader.string("webhooks") else { return }
        if text.isEmpty {
            daemon.webhooks = nil
        } else if let address = ListenAddress(text) {
            daemon.webhooks = address
        } else {
            report(
                reader.path.key("webhooks"),
                "expected \"host:port\" with a port 1…65535, or \"\" to turn the webhook listener off; found \"\(text)\"")
        }
    }

    /// `[bridge.webhooks]`: `topic_prefix` is required (setting it is what enables webhooks).
    func readWebhooks(_ reader: TableReader) -> BridgeWebhookSettings? {
        reader.rejectUnknownKeys(allowed: Self.webhookKeys)
        let prefix = reader.nonEmptyString("topic_prefix", required: true)
        var usablePrefix: String?
        if let prefix {
            if let problem = Self.mqttTopicProblem(prefix) {
                report(reader.path.key("topic_prefix"), problem)
            } else if prefix.contains("{") {
                report(reader.path.key("topic_prefix"), "takes no placeholders; webhooks go to \(prefix)/channels/<channel>/…")
            } else if prefix.hasSuffix("/") {
                report(reader.path.key("topic_prefix"), "must not end with '/'")
            } else {
                usablePrefix = prefix
            }
        }
        var events = Set(PusherWebhookKind.allCases)
        if let names = reader.stringArray("events") {
            var chosen = Set<PusherWebhookKind>()
            for name in names {
                if let kind = PusherWebhookKind(rawValue: name) {
                    chosen.insert(kind)
                } else {
                    let known = PusherWebhookKind.allCases.map(\.rawValue).joined(separator: ", ")
                    report(reader.path.key("events"), "unknown webhook event \"\(name)\"; expected some of \(known)")
                }
            }
            if names.isEmpty {
                report(reader.path.key("events"), "lists no event; leave the key out for all seven, or remove [bridge.webhooks]")
            }
            events = chosen
        }
        let qos = reader.qos("qos") ?? 1
        guard let usablePrefix, !events.isEmpty else { return nil }
        return BridgeWebhookSettings(topicPrefix: usablePrefix, events: events, qos: qos)
    }

    /// A bridge with `[bridge.webhooks]` needs the secret (to check `X-Pusher-Signature`) and the
    /// daemon's listener. A missing listener is an error rather than a warning: webhooks that can
    /// never arrive are a configuration mistake nobody would notice otherwise.
    func checkWebhooks(_ bridge: BridgeSettings, daemon: DaemonSettings, daemonListenerWritten: Bool, path: ConfigKeyPath) {
        guard bridge.webhooks != nil else { return }
        if bridge.pusher.secret == nil {
            report(
                path.key("webhooks"),
                "webhooks need pusher.secret (or secret_file): requests are checked against their X-Pusher-Signature")
        }
        if daemon.webhooks == nil, !daemonListenerWritten {
            report(
                path.key("webhooks"),
                "webhooks are enabled for this bridge but the listener is off: set [daemon] webhooks = \"host:port\"")
        }
    }
}
