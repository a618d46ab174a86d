/// `[daemon]`, `[[bridge]]`, `[bridge.pusher]` and `[bridge.mqtt]` in the one table of keys
/// (ConfigKey.swift).
extension ConfigKey {
    static let process: [ConfigKey] = [
        ConfigKey(.daemon, "log_level", "`info`", "`trace`, `debug`, `info`, `notice`, `warning` or `error`"),
        ConfigKey(.daemon, "log_format", "`text`", "`text`, or `json` (one JSON object per line)"),
        ConfigKey(
            .daemon, "metrics", "`\"127.0.0.1:9464\"`",
            "`\"host:port\"` of the HTTP endpoint serving `/metrics`, `/healthz` and `/readyz`; `\"\"` turns it off"),
        ConfigKey(
            .daemon, "state_dir", "`/var/lib/pusher-mqtt-bridge`",
            "where each bridge keeps its spool and state (systemd's `StateDirectory`); relative to the config file's folder"),
        ConfigKey(.daemon, "shutdown_grace", "`5s`", "how long a stop may spend delivering what is buffered before it exits"),
        ConfigKey(
            .daemon, "webhooks", "`\"\"` (off)",
            "`\"host:port\"` of the one HTTP listener for every bridge's Pusher webhooks (`POST /webhooks/<bridge>`)"),
        ConfigKey(
            .daemon, "control_socket", "`$RUNTIME_DIRECTORY/control.sock` under systemd, else `<state_dir>/control.sock`",
            "the Unix socket (mode 0600) that `dead-letters redrive` and `purge` talk to; `\"\"` turns it off"),
        ConfigKey(
            .daemon, "homeassistant", "`false`",
            "Home Assistant MQTT discovery: each bridge (each member in a cluster) becomes a device with entities for its "
                + "connections, rates, buffers and dead letters. A reload turns it on or off in place (off removes the devices)"),
        ConfigKey(
            .daemon, "homeassistant_prefix", "`homeassistant`",
            "Home Assistant's discovery prefix: configs go to `<prefix>/<component>/<node_id>/<object_id>/config`, and "
                + "`<prefix>/status` = `online` makes the bridge publish them again"),

        ConfigKey(
            .bridge, "name", "required",
            "`[a-z0-9_-]+`, unique in the file; names the bridge in logs, metric labels, topics and the state folder"),
        ConfigKey(.bridge, "pusher", "required", "the table `[bridge.pusher]`"),
        ConfigKey(.bridge, "mqtt", "required", "the table `[bridge.mqtt]`"),
        ConfigKey(.bridge, "reconnect", "—", "the table `[bridge.reconnect]`"),
        ConfigKey(.bridge, "buffer", "—", "the table `[bridge.buffer]`"),
        ConfigKey(.bridge, "rule", "—", "the array of tables `[[bridge.rule]]`"),
        ConfigKey(.bridge, "presence", "—", "the array of tables `[[bridge.presence]]`"),
        ConfigKey(.bridge, "webhooks", "—", "the table `[bridge.webhooks]`"),
        ConfigKey(.bridge, "cluster", "—", "the table `[bridge.cluster]`"),
        ConfigKey(.bridge, "users", "—", "the table `[bridge.users]`"),
        ConfigKey(
            .bridge, "max_dead_letters", "`10000`",
            "1–10,000,000: dead letters the bridge keeps in its state folder (for `dead-letters list` and `redrive`); the oldest "
                + "is evicted, and counted, to make room. A change restarts the bridge on reload"),
    ]

    static let pusherSide: [ConfigKey] = [
        ConfigKey(.pusher, "key", "required", "the app key"),
        ConfigKey(
            .pusher, "app_id", "—",
            "the app id; needed by MQTT → Pusher rules, channel discovery and anything else that uses the HTTP API"),
        ConfigKey(.pusher, "secret", "—", "the app secret: signs private and presence subscriptions and HTTP API requests"),
        ConfigKey(.pusher, "secret_file", "—", "the secret read from a file instead (one trailing newline removed)"),
        ConfigKey(
            .pusher, "cluster", "`mt1` (without `host`)",
            "hosted Pusher: `ws-<cluster>.pusher.com` and `api-<cluster>.pusher.com`, with TLS"),
        ConfigKey(.pusher, "host", "—", "a Pusher-compatible server instead of a cluster (pusher-local, soketi, …); not with `cluster`"),
        ConfigKey(.pusher, "port", "443 (80 without TLS)", "the server's port; only with `host`"),
        ConfigKey(.pusher, "tls", "`true`", "`wss://` and `https://`"),
        ConfigKey(.pusher, "rest_host", "`host`", "the HTTP API's host when it is not `host`"),
        ConfigKey(.pusher, "rest_port", "`port`", "the HTTP API's port when it is not `port`"),
        ConfigKey(.pusher, "ca_file", "the system's trust store", "CA certificates (PEM) to verify the server with"),
        ConfigKey(
            .pusher, "auth_endpoint", "—",
            "an `http(s)://` endpoint that authorizes private and presence subscriptions instead of the secret"),
        ConfigKey(.pusher, "auth_headers", "—", "a table of headers sent to `auth_endpoint` and `user_auth_endpoint`"),
        ConfigKey(
            .pusher, "activity_timeout", "`120s`",
            "idle time before the client pings; the smaller of this and the server's value is used; at least `1s`"),
        ConfigKey(
            .pusher, "pong_timeout", "`30s`", "how long a ping may wait for its pong before the connection is dropped; at least `100ms`"),
        ConfigKey(
            .pusher, "encryption_master_key_base64", "—", "32 bytes in base64: decrypts `private-encrypted-` channels"),
        ConfigKey(.pusher, "encryption_master_key_base64_file", "—", "the same, read from a file"),
        ConfigKey(
            .pusher, "user_id", "`pusher-mqtt-bridge-<bridge>`",
            "the bridge's identity in presence channels and, with `sign_in`, as a user (signed with the secret)"),
        ConfigKey(.pusher, "user_info", "none", "a JSON object sent with `user_id`"),
        ConfigKey(.pusher, "max_event_bytes", "`10KiB`", "larger event data is dead-lettered (`too_large`) instead of sent"),
        ConfigKey(
            .pusher, "api_lanes", "`8`",
            "1–64: MQTT → Pusher HTTP requests in flight at once; one per channel at a time, so order holds per channel. "
                + "Throughput is at most min(`api_lanes`, busy channels) × 10 events per round trip. A change restarts the bridge on reload"
        ),
        ConfigKey(
            .pusher, "connections", "`1`",
            "1–3 independent connections, each holding every channel, merged so that one connection's close loses nothing. "
                + "Pusher counts each delivery: N connections cost N× the messages Pusher → MQTT. A change restarts the bridge on reload"),
        ConfigKey(
            .pusher, "drain_rate", "none",
            "`\"N/s\"` or `\"N/min\"`: after an outage of the HTTP API (or at start, for what the spool holds) the MQTT → Pusher "
                + "backlog leaves at most this fast; live messages are not held"),
        ConfigKey(
            .pusher, "sign_in", "`false`",
            "sign in as a user on every connection: as `user_id` signed with the secret, or as whoever `user_auth_endpoint` answers for"),
        ConfigKey(
            .pusher, "user_auth_endpoint", "—",
            "an `http(s)://` user authentication endpoint instead of the secret (form POST of `socket_id`; the reply "
                + "`{\"auth\",\"user_data\"}` chooses the user). Only with `sign_in = true`"),
        ConfigKey(
            .pusher, "watchlist", "none",
            "up to 100 user ids whose online and offline Pusher reports to the bridge's user. Needs `sign_in` and the secret"),
    ]

    static let mqttSide: [ConfigKey] = [
        ConfigKey(.mqtt, "host", "`localhost`", "the broker"),
        ConfigKey(.mqtt, "port", "1883 (8883 with TLS)", "the broker's port"),
        ConfigKey(
            .mqtt, "hosts", "—",
            "instead of `host` and `port`: the nodes of a broker cluster, `[\"node1:1883\", \"node2:1883\"]` (`[IPv6]:port` "
                + "too; the port defaults as `port` does). The first that answers is used; a failed attempt or a lost "
                + "connection goes on to the next with the usual backoff, and the session, Will and subscriptions are set "
                + "up again there"),
        ConfigKey(.mqtt, "tls", "`false`", "TLS to the broker"),
        ConfigKey(.mqtt, "ca_file", "the system's trust store", "CA certificates (PEM) to verify the broker with"),
        ConfigKey(.mqtt, "cert_file", "—", "a client certificate (PEM); with `key_file`"),
        ConfigKey(.mqtt, "key_file", "—", "the client certificate's private key (PEM); with `cert_file`"),
        ConfigKey(.mqtt, "tls_insecure", "`false`", "skips the check that the certificate names the host: never in production"),
        ConfigKey(
            .mqtt, "client_id", "`pusher-mqtt-bridge-<bridge>`",
            "unique across bridges (two clients with one id keep disconnecting each other); in a cluster `<client_id>-<instance>`"),
        ConfigKey(.mqtt, "username", "—", "the user name"),
        ConfigKey(.mqtt, "password", "—", "the password; needs `username`"),
        ConfigKey(.mqtt, "password_file", "—", "the password read from a file"),
        ConfigKey(.mqtt, "protocol", "`5`", "`5` for MQTT 5, `4` for MQTT 3.1.1"),
        ConfigKey(
            .mqtt, "clean_session", "`false`",
            "`false`: a persistent session, so the broker keeps QoS ≥ 1 messages for the bridge while it is away"),
        ConfigKey(.mqtt, "keepalive", "`30s`", "`5s`–`65535s` (libmosquitto's limits)"),
        ConfigKey(
            .mqtt, "session_expiry", "`1h`", "the MQTT 5 Session Expiry Interval; without one an MQTT 5 session is not kept"),
        ConfigKey(.mqtt, "status_topic", "`pusher-mqtt-bridge/<bridge>/status`", "retained `online`; the Last Will `offline`"),
        ConfigKey(.mqtt, "dead_letter_topic", "off", "where messages that cannot be delivered are published, as JSON"),
        ConfigKey(
            .mqtt, "drain_rate", "none",
            "`\"N/s\"` or `\"N/min\"`: once the broker is back (or at start, for what the spool holds) the Pusher → MQTT "
                + "backlog leaves at most this fast; live messages are not held"),
    ]
}
