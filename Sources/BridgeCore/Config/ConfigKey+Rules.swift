/// Delivery, rules, presence mirrors, webhooks, clusters and users in the one table of keys
/// (ConfigKey.swift).
extension ConfigKey {
    static let delivery: [ConfigKey] = [
        ConfigKey(.reconnect, "initial_delay", "`1s`", "the delay before the first retry"),
        ConfigKey(.reconnect, "max_delay", "`120s`", "the longest delay"),
        ConfigKey(.reconnect, "multiplier", "`2.0`", "growth per failed attempt, at least 1"),
        ConfigKey(.reconnect, "jitter", "`0.2`", "0–1: each delay is multiplied by a random factor in [1 − jitter, 1 + jitter]"),
        ConfigKey(.reconnect, "stable_after", "`30s`", "a connection up this long resets the attempt count"),

        ConfigKey(.buffer, "max_messages", "`100000`", "messages buffered per direction at most"),
        ConfigKey(.buffer, "max_bytes", "`64MiB`", "payload bytes buffered per direction at most"),
        ConfigKey(
            .buffer, "overflow", "see meaning",
            "`drop-oldest`, `drop-newest` or `backpressure`. Without the key MQTT → Pusher uses `backpressure` when a rule "
                + "reads at QoS ≥ 1 (else `drop-oldest`) and Pusher → MQTT `drop-oldest`; Pusher cannot be held back, so "
                + "`backpressure` means `drop-oldest` there. Every drop is counted and logged"),
        ConfigKey(.buffer, "persist", "`true`", "spool both directions to `state_dir`, so a restart loses nothing buffered"),
    ]

    /// Keys both kinds of rule take: the payload conditions and shaping.
    static func payloadRuleKeys(_ table: Table) -> [ConfigKey] {
        [
            ConfigKey(
                table, "where", "none",
                "a condition on the JSON payload (`/temperature > 30 and /unit == \"C\"`); messages that do not match are counted "
                    + "`filtered`"),
            ConfigKey(
                table, "throttle", "none",
                "at least `10ms`: per target, the latest message of each interval is sent at its end; the ones it replaced count "
                    + "`coalesced`"),
            ConfigKey(
                table, "on_change", "`false`", "a payload identical to the last one sent to the same target is dropped as `unchanged`"),
            ConfigKey(
                table, "max_targets", "`10000`",
                "1–1,000,000 targets a shaping rule remembers; a new target beyond it is sent unshaped and counted"),
        ]
    }

    /// Keys that discover channels under a prefix instead of naming one.
    static func discoveryKeys(_ table: Table) -> [ConfigKey] {
        [
            ConfigKey(
                table, "channel_prefix", "—",
                "instead of `channel`: every channel whose name starts so (found through the HTTP API and webhooks); "
                    + "needs `app_id` and the secret"),
            ConfigKey(table, "discovery_interval", "`30s`", "how often the prefix is polled; at least `5s`. Only with `channel_prefix`"),
            ConfigKey(table, "max_channels", "`1000`", "1–1,000,000 channels held under the prefix; more are skipped and counted"),
            ConfigKey(table, "idle_timeout", "`10m`", "a discovered channel with no event this long is left (servers without counts)"),
        ]
    }

    static let rules: [ConfigKey] =
        [
            ConfigKey(.pusherRule, "name", "required", "unique in the bridge, `[A-Za-z0-9_-]+`; labels metrics and dead letters"),
            ConfigKey(.pusherRule, "from", "required", "`\"pusher\"`"),
            ConfigKey(
                .pusherRule, "channel", "required", "one literal channel name (Pusher cannot subscribe by pattern; see `channel_prefix`)"),
            ConfigKey(.pusherRule, "events", "`[\"*\"]`", "event names; `*` is every event but `pusher:*` and `pusher_internal:*`"),
            ConfigKey(
                .pusherRule, "topic", "required",
                "a template: `{channel}`, `{event}`, `{user_id}`, `{bridge}` (and `{suffix}` with `channel_prefix`)"),
            ConfigKey(.pusherRule, "qos", "`1`", "0–2"),
            ConfigKey(.pusherRule, "retain", "`false`", "publish retained"),
            ConfigKey(
                .pusherRule, "payload", "`data`",
                "`data` (the event's data as it is), `envelope` (a JSON envelope with the metadata), or `json:/pointer` (one member)"),
        ] + discoveryKeys(.pusherRule) + payloadRuleKeys(.pusherRule)
        + [
            ConfigKey(.mqttRule, "name", "required", "unique in the bridge, `[A-Za-z0-9_-]+`; labels metrics and dead letters"),
            ConfigKey(.mqttRule, "from", "required", "`\"mqtt\"`"),
            ConfigKey(.mqttRule, "topic", "required", "an MQTT topic filter; `+` and `#` allowed"),
            ConfigKey(
                .mqttRule, "channel", "required (or `to_user`, `terminate_user`)",
                "a template: `{1}`…`{n}` are the levels each `+` matched, `{#}` what `#` matched, `{topic}` the topic"),
            ConfigKey(
                .mqttRule, "to_user", "—", "instead of `channel`: a template rendering a user id; the event goes to that user's connections"
            ),
            ConfigKey(
                .mqttRule, "terminate_user", "—",
                "instead of `channel` and `event`: a template rendering a user id whose connections Pusher closes"),
            ConfigKey(.mqttRule, "event", "required", "a template for the event name"),
            ConfigKey(.mqttRule, "qos", "`1`", "the subscription's QoS"),
            ConfigKey(.mqttRule, "forward_retained", "`false`", "whether retained messages are sent on when the bridge (re)subscribes"),
            ConfigKey(.mqttRule, "payload", "`data`", "`data`, `envelope`, or `json:/pointer`"),
            ConfigKey(
                .mqttRule, "via", "`http`",
                "`http` (the HTTP API), or `client-event` (a fixed `private-`/`presence-` channel and an event named `client-*`)"),
        ] + payloadRuleKeys(.mqttRule)

    static let extensions: [ConfigKey] =
        [
            ConfigKey(.presence, "channel", "required", "a `presence-` channel (or `channel_prefix`, every room under it)"),
            ConfigKey(
                .presence, "topic", "required",
                "the base topic: `<topic>/members/<user id>` (retained user info) and `<topic>/count`; with `channel_prefix`, "
                    + "`{suffix}` as one level"),
            ConfigKey(.presence, "qos", "`1`", "0–2"),
        ] + discoveryKeys(.presence)
        + [
            ConfigKey(
                .webhooks, "topic_prefix", "required",
                "where webhook events are published (`<topic_prefix>/channel_occupied/<channel>`, …); setting it turns webhooks on"),
            ConfigKey(
                .webhooks, "events", "all seven",
                "`channel_occupied`, `channel_vacated`, `member_added`, `member_removed`, `client_event`, `cache_miss`, "
                    + "`subscription_count`"),
            ConfigKey(.webhooks, "qos", "`1`", "0–2"),

            ConfigKey(.cluster, "group", "required", "daemons with the same group share the bridge's channels and MQTT subscriptions"),
            ConfigKey(.cluster, "instance", "required", "`[a-z0-9_-]+`, unique in the group (`\"${HOSTNAME}\"` is typical)"),
            ConfigKey(.cluster, "membership_topic", "`pusher-mqtt-bridge/cluster/<group>`", "where members announce themselves"),
            ConfigKey(.cluster, "heartbeat_interval", "`1s`", "100ms–60s"),
            ConfigKey(
                .cluster, "member_timeout", "`3s`",
                "at least 2 × `heartbeat_interval`: a member not heard from for this long is taken for dead"),
            ConfigKey(.cluster, "join_settle", "`2s`", "0–60s: a member that joins takes channels only after this long"),
            ConfigKey(
                .cluster, "mqtt_to_pusher", "`\"shared\"`",
                "`\"shared\"`: the rules' filters as `$share/<group>/…`, the broker gives each message to one member; "
                    + "`\"partition\"`: every member subscribes and sends only the messages whose channel it owns (brokers "
                    + "without shared subscriptions; order per channel across the cluster)"),

            ConfigKey(
                .users, "topic", "required",
                "`<topic>/<id>/online` (retained `\"true\"`/`\"false\"`) for the watchlist, `<topic>/<bridge user>/events/<event>` "
                    + "for events sent to the bridge's user. Needs `sign_in`"),
            ConfigKey(.users, "qos", "`1`", "0–2"),
        ]
}
