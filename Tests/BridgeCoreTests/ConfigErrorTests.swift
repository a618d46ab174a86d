import Testing

@testable import BridgeCore

/// One bad config and exactly what `check` must print for it.
struct BadConfig: CustomTestStringConvertible, Sendable {
    let name: String
    let text: String
    let expected: [String]
    var variables: [String: String] = [:]
    var files: [String: String] = [:]
    var testDescription: String { name }
}

/// The base every bad config below varies: lines 1–12.
private let head = """
    [[bridge]]
    name = "factory"
    [bridge.pusher]
    key = "app-key"
    app_id = "1"
    secret = "app-secret"
    host = "127.0.0.1"
    port = 6001
    tls = false
    [bridge.mqtt]
    host = "127.0.0.1"
    client_id = "factory-1"
    """

private let badConfigs: [BadConfig] = [
    BadConfig(
        name: "TOML syntax error has line and column",
        text: "[daemon]\nlog_level = \"info\n",
        expected: [
            "/etc/bridges.conf:2:18: error: Error while parsing string: unescaped control characters other than TAB (U+0009) are explicitly prohibited"
        ]),
    BadConfig(
        name: "TOML syntax error: a key without a value",
        text: "[daemon]\n\nlog_level =\n",
        expected: ["/etc/bridges.conf:3:12: error: Error while parsing key-value pair: expected value, saw '\\n'"]),
    BadConfig(
        name: "table headers that would crash toml++ are syntax errors",
        text: "[daemon]\nlog_level = \"info\"\n  [[ =]]\n",
        expected: [
            "/etc/bridges.conf:3:6: error: Error while parsing table header: expected bare key starting character or string delimiter, saw '='"
        ]),
    BadConfig(
        name: "'}' where an array expects a value would crash toml++ (found by make fuzz)",
        text: "[daemon]\nlog_level = \"info\"\nx = { a = [0,   }}2]\n",
        expected: ["/etc/bridges.conf:3:17: error: Error while parsing array: expected value, saw '}'"]),
    BadConfig(
        name: "'}' after '[' across a comment and a line would crash toml++ (found by make fuzz)",
        text: "[daemon]\nx = [ # values\n  }\n",
        expected: ["/etc/bridges.conf:3:3: error: Error while parsing array: expected value, saw '}'"]),
    BadConfig(
        name: "a UTF-8 byte order mark before a bad header is skipped, not a way past the guard (found by make fuzz)",
        text: "\u{FEFF}[?bridge]]\nx = 1\n",
        expected: [
            "/etc/bridges.conf:1:2: error: Error while parsing table header: expected bare key starting character or string delimiter, saw '?'"
        ]),
    BadConfig(
        name: "a second byte order mark before a bad header would crash toml++ (found by the CI's fuzz smoke)",
        text: "\u{FEFF}\u{FEFF}[,brid[[bridge]]\nname = \"b\"\n",
        expected: [
            "/etc/bridges.conf:1:1: error: a byte order mark (U+FEFF) inside the file: only one is allowed, as its very first character"
        ]),
    BadConfig(
        name: "a byte order mark inside the file is refused where it is",
        text: "[daemon]\nlog_level = \"info\"\n\u{FEFF}x = 1\n",
        expected: [
            "/etc/bridges.conf:3:1: error: a byte order mark (U+FEFF) inside the file: only one is allowed, as its very first character"
        ]),
    BadConfig(
        name: "a date-time without a digit after 'T' would crash toml++ (found by make fuzz)",
        text: "[[bridge]]\nname =1979-05-27T\u{10}7:32:00Z\nkey = \"${PUSHE8R_KE6Y}\"\nsnt = \"{#}\"\n",
        expected: [
            "/etc/bridges.conf:2:18: error: Error while parsing date-time: expected 2-digit hour, saw a control or non-ASCII character"
        ]),
    BadConfig(
        name: "a date-time with a letter after 't' would crash toml++",
        text: "[daemon]\nx = [1979-05-27tx7:32:00Z]\n",
        expected: ["/etc/bridges.conf:2:17: error: Error while parsing date-time: expected 2-digit hour, saw 'x'"]),
    BadConfig(
        name: "a lone [ is a syntax error",
        text: "[daemon]\n[\n",
        expected: [
            "/etc/bridges.conf:2:2: error: Error while parsing table header: expected bare key starting character or string delimiter, saw end of line"
        ]),
    BadConfig(
        name: "unknown implicit parent table has the header's line",
        text: "[a.b]\nx = 1\n[[bridge]]\nname = \"x\"\n[bridge.pusher]\nkey = \"k\"\n",
        expected: ["/etc/bridges.conf:1: error: a: unknown key 'a'"]),
    BadConfig(
        name: "no bridge",
        text: "[daemon]\nlog_level = \"info\"\n",
        expected: ["/etc/bridges.conf: error: bridge: no [[bridge]] is configured; at least one is required"]),
    BadConfig(
        name: "unknown keys with did-you-mean, at their lines",
        text: head + "\nkeepalive = \"30s\"\nstatus_topik = \"x\"\n[daemon]\nlog_levl = \"debug\"\nfoo = 1\n",
        expected: [
            "/etc/bridges.conf:14: error: bridge.factory.mqtt.status_topik: unknown key 'status_topik' (did you mean 'status_topic'?)",
            "/etc/bridges.conf:16: error: daemon.log_levl: unknown key 'log_levl' (did you mean 'log_level'?)",
            "/etc/bridges.conf:17: error: daemon.foo: unknown key 'foo'",
        ]),
    BadConfig(
        name: "wrong types and enum values",
        text: "[daemon]\nlog_level = 3\nlog_format = \"jsno\"\nshutdown_grace = 5\n" + head,
        expected: [
            "/etc/bridges.conf:2: error: daemon.log_level: expected a string, found an integer",
            "/etc/bridges.conf:3: error: daemon.log_format: \"jsno\" is not one of \"text\", \"json\" (did you mean \"json\"?)",
            "/etc/bridges.conf:4: error: daemon.shutdown_grace: expected a duration string like \"30s\", found an integer",
        ]),
    BadConfig(
        name: "bad bridge name and missing required keys",
        text: "[[bridge]]\nname = \"Factory 1\"\n[bridge.pusher]\nhost = \"x\"\n",
        expected: [
            "/etc/bridges.conf:2: error: bridge[1].name: \"Factory 1\" is not a valid bridge name; use lower-case letters, digits, '_' and '-'",
            "/etc/bridges.conf:3: error: bridge[1].pusher.key: required key is missing",
        ]),
    BadConfig(
        name: "duplicate bridge names and client ids",
        text: head + "\n" + head,
        expected: [
            "/etc/bridges.conf:14: error: bridge[2].name: duplicate bridge name \"factory\" (bridge #1 has it too)",
            "/etc/bridges.conf:24: error: bridge[2].mqtt.client_id: client_id \"factory-1\" is also used by bridge factory; two clients with one id keep disconnecting each other",
        ]),
    BadConfig(
        name: "ports out of range (decoded as Int, never trapping)",
        text: head.replacingOccurrences(of: "port = 6001", with: "port = 70000") + "\nport = -1\n[bridge.pusher.x]\n",
        expected: [
            "/etc/bridges.conf:8: error: bridge.factory.pusher.port: 70000 is out of range; must be 1…65535",
            "/etc/bridges.conf:13: error: bridge.factory.mqtt.port: -1 is out of range; must be 1…65535",
            "/etc/bridges.conf:14: error: bridge.factory.pusher.x: unknown key 'x'",
        ]),
    BadConfig(
        name: "durations, sizes, reconnect bounds",
        text: head
            + "\nkeepalive = \"30 parsecs\"\n[bridge.reconnect]\ninitial_delay = \"10s\"\nmax_delay = \"1s\"\njitter = 1.5\nmultiplier = 0.5\n[bridge.buffer]\nmax_bytes = \"64MB!\"\noverflow = \"drop-latest\"\n",
        expected: [
            "/etc/bridges.conf:13: error: bridge.factory.mqtt.keepalive: unknown duration unit \"parsecs\" in \"30 parsecs\"; use ms, s, m or h",
            "/etc/bridges.conf:14: error: bridge.factory.reconnect: max_delay must be at least initial_delay",
            "/etc/bridges.conf:17: error: bridge.factory.reconnect.jitter: must be between 0 and 1, found 1.5",
            "/etc/bridges.conf:18: error: bridge.factory.reconnect.multiplier: must be a number ≥ 1, found 0.5",
            "/etc/bridges.conf:20: error: bridge.factory.buffer.max_bytes: unknown size unit \"MB!\" in \"64MB!\"; use B, KiB, MiB, GiB (or KB, MB, GB)",
            "/etc/bridges.conf:21: error: bridge.factory.buffer.overflow: \"drop-latest\" is not one of \"drop-oldest\", \"drop-newest\", \"backpressure\" (did you mean \"drop-oldest\"?)",
        ]),
    BadConfig(
        name: "unset environment variable, missing secret file, missing ca file",
        text: head.replacingOccurrences(of: "secret = \"app-secret\"", with: "secret_file = \"pusher-secret\"")
            + "\nusername = \"${MQTT_USER}\"\nca_file = \"certs/ca.pem\"\n",
        expected: [
            "/etc/bridges.conf:6: error: bridge.factory.pusher.secret_file: cannot read secret file /run/credentials/bridge/pusher-secret",
            "/etc/bridges.conf:13: error: bridge.factory.mqtt.username: environment variable MQTT_USER is not set",
            "/etc/bridges.conf:14: error: bridge.factory.mqtt.ca_file: file /etc/certs/ca.pem does not exist",
        ],
        variables: ["CREDENTIALS_DIRECTORY": "/run/credentials/bridge"]),
    BadConfig(
        name: "a sub-table nobody asked for is an unknown key",
        text: head + "\n[bridge.pusher.extra]\n",
        expected: ["/etc/bridges.conf:13: error: bridge.factory.pusher.extra: unknown key 'extra'"]),
    BadConfig(
        name: "filters and template capture counts",
        text: head + """

            [[bridge.rule]]
            name = "a"
            from = "mqtt"
            topic = "a/#/b"
            channel = "x"
            event = "y"
            [[bridge.rule]]
            name = "b"
            from = "mqtt"
            topic = "sensors/+/temperature"
            channel = "sensor-{2}"
            event = "{#}"
            [[bridge.rule]]
            name = "c"
            from = "mqtt"
            topic = "sensors/x+"
            channel = "c"
            event = "e"
            """,
        expected: [
            "/etc/bridges.conf:16: error: bridge.factory.rule.a.topic: '#' must be the last level of a topic filter (\"a/#/b\")",
            "/etc/bridges.conf:23: error: bridge.factory.rule.b.channel: {2} does not exist: the filter has only 1 '+' wildcard",
            "/etc/bridges.conf:24: error: bridge.factory.rule.b.event: {#} needs a filter that ends in '#'",
            "/etc/bridges.conf:28: error: bridge.factory.rule.c.topic: a wildcard must fill a whole level: level 2 of \"sensors/x+\" is \"x+\"",
        ]),
    BadConfig(
        name: "rendered-name rules decided statically",
        text: head + """

            [[bridge.rule]]
            name = "bad-channel"
            from = "mqtt"
            topic = "a/+"
            channel = "room/{1}"
            event = "pusher:subscribe"
            [[bridge.rule]]
            name = "topic-wildcard"
            from = "pusher"
            channel = "market"
            topic = "dash/+/{event}"
            events = ["pusher:ping"]
            [[bridge.rule]]
            name = "placeholder"
            from = "pusher"
            channel = "market"
            topic = "dash/{evnt}"
            """,
        expected: [
            "/etc/bridges.conf:17: error: bridge.factory.rule.bad-channel.channel: '/' can never appear in a channel name; allowed are A-Z a-z 0-9 _ - = @ , . ;",
            "/etc/bridges.conf:18: error: bridge.factory.rule.bad-channel.event: event names starting with 'pusher:' are reserved for the protocol",
            "/etc/bridges.conf:23: error: bridge.factory.rule.topic-wildcard.topic: a topic to publish to cannot contain '+' or '#' (placeholder values are escaped, literal text is not)",
            "/etc/bridges.conf:24: error: bridge.factory.rule.topic-wildcard.events: \"pusher:ping\": event names starting with 'pusher:' are reserved",
            "/etc/bridges.conf:29: error: bridge.factory.rule.placeholder.topic: unknown placeholder {evnt} (did you mean {event}?)",
        ]),
    BadConfig(
        name: "private, presence and encrypted channels without credentials; mqtt rule without app_id",
        text: """
            [[bridge]]
            name = "open"
            [bridge.pusher]
            key = "k"
            [[bridge.rule]]
            name = "p"
            from = "pusher"
            channel = "private-orders"
            topic = "orders"
            [[bridge.rule]]
            name = "e"
            from = "pusher"
            channel = "private-encrypted-vault"
            topic = "vault"
            [[bridge.rule]]
            name = "up"
            from = "mqtt"
            topic = "up/#"
            channel = "uplink"
            event = "msg"
            [[bridge.presence]]
            channel = "presence-ops"
            topic = "ops"
            """,
        expected: [
            "/etc/bridges.conf:8: error: bridge.open.rule.p.channel: channel \"private-orders\" needs authorization: set pusher.secret (or secret_file) or pusher.auth_endpoint",
            "/etc/bridges.conf:13: error: bridge.open.rule.e.channel: channel \"private-encrypted-vault\" needs authorization: set pusher.secret (or secret_file) or pusher.auth_endpoint",
            "/etc/bridges.conf:13: error: bridge.open.rule.e.channel: channel \"private-encrypted-vault\" is encrypted: set pusher.encryption_master_key_base64 (or _file)",
            "/etc/bridges.conf:15: error: bridge.open.rule.up: publishes into Pusher through the HTTP API, which needs pusher.app_id",
            "/etc/bridges.conf:15: error: bridge.open.rule.up: publishes into Pusher through the HTTP API, which needs pusher.secret (or secret_file) to sign requests",
            "/etc/bridges.conf:22: error: bridge.open.presence[1].channel: channel \"presence-ops\" needs authorization: set pusher.secret (or secret_file) or pusher.auth_endpoint",
        ]),
    BadConfig(
        name: "rules: duplicate names, bad from, keys of the other direction, QoS",
        text: head + """

            [[bridge.rule]]
            name = "r"
            from = "pusher"
            channel = "c"
            topic = "t"
            forward_retained = true
            qos = 3
            [[bridge.rule]]
            name = "r"
            from = "pusher"
            channel = "c2"
            topic = "t2"
            [[bridge.rule]]
            name = "s"
            from = "mqtt-broker"
            """,
        expected: [
            "/etc/bridges.conf:18: error: bridge.factory.rule.r.forward_retained: 'forward_retained' only applies to rules with from = \"mqtt\"",
            "/etc/bridges.conf:19: error: bridge.factory.rule.r.qos: QoS must be 0, 1 or 2, found 3",
            "/etc/bridges.conf:21: error: bridge.factory.rule[2].name: duplicate rule name \"r\" in bridge factory",
            "/etc/bridges.conf:27: error: bridge.factory.rule.s.from: \"mqtt-broker\" is not one of \"pusher\", \"mqtt\" (did you mean \"mqtt\"?)",
        ]),
    BadConfig(
        name: "presence mirror: wrong channel kind, wildcard topic; client-event rule rules",
        text: head + """

            [[bridge.presence]]
            channel = "private-ops"
            topic = "ops/#"
            [[bridge.rule]]
            name = "ce"
            from = "mqtt"
            topic = "x/+"
            channel = "public-{1}"
            event = "update"
            via = "client-event"
            """,
        expected: [
            "/etc/bridges.conf:14: error: bridge.factory.presence[1].channel: \"private-ops\" is not a presence channel (the name must start with \"presence-\")",
            "/etc/bridges.conf:15: error: bridge.factory.presence[1].topic: topic contains a wildcard ('+' or '#')",
            "/etc/bridges.conf:20: error: bridge.factory.rule.ce.channel: via = \"client-event\" needs one fixed channel (the bridge must be subscribed to it to send client events)",
            "/etc/bridges.conf:21: error: bridge.factory.rule.ce.event: via = \"client-event\" needs an event name starting with \"client-\"",
        ]),
    BadConfig(
        name: "master key must be 32 bytes; user_info too large; cluster and host",
        text: head.replacingOccurrences(
            of: "tls = false", with: "tls = false\ncluster = \"eu\"\nencryption_master_key_base64 = \"c2hvcnQ=\"")
            + "\n",
        expected: [
            "/etc/bridges.conf:7: error: bridge.factory.pusher.host: set either cluster (hosted Pusher) or host (a custom server), not both",
            "/etc/bridges.conf:11: error: bridge.factory.pusher.encryption_master_key_base64: must be the base64 encoding of exactly 32 bytes",
        ]),
]

@Suite("Config errors: every class, exact messages")
struct ConfigErrorTests {
    @Test(arguments: badConfigs)
    func reportsExactly(_ bad: BadConfig) {
        let errors = Fixture.errors(bad.text, environment: Fixture.environment(variables: bad.variables, files: bad.files))
        #expect(errors == bad.expected)
    }

    @Test func secretAndSecretFileTogether() {
        let text = head.replacingOccurrences(of: "secret = \"app-secret\"", with: "secret = \"a\"\nsecret_file = \"/s\"")
        let errors = Fixture.errors(text, environment: Fixture.environment(files: ["/s": "b"]))
        #expect(errors == ["/etc/bridges.conf:7: error: bridge.factory.pusher.secret_file: set either secret or secret_file, not both"])
    }

    @Test func secretFileFromCredentialsDirectoryIsTrimmed() throws {
        let text = head.replacingOccurrences(of: "secret = \"app-secret\"", with: "secret_file = \"pusher-secret\"")
        let configuration = try Fixture.parse(
            text,
            environment: Fixture.environment(
                variables: ["CREDENTIALS_DIRECTORY": "/run/credentials/x"], files: ["/run/credentials/x/pusher-secret": "s3cr3t\n"]))
        #expect(configuration.bridges[0].pusher.secret?.value == "s3cr3t")
        #expect("\(configuration.bridges[0].pusher.secret!)" == "<redacted>")
    }

    @Test func environmentExpansionInStringsArraysAndInlineTables() throws {
        let text =
            head.replacingOccurrences(
                of: "secret = \"app-secret\"", with: "secret = \"${SECRET}\"\nuser_info = { team = \"${TEAM}\", n = 2 }")
            + "\nusername = \"$${literal}\"\n"
        let configuration = try Fixture.parse(text, environment: Fixture.environment(variables: ["SECRET": "xyz", "TEAM": "ops"]))
        let bridge = try #require(configuration.bridges.first)
        #expect(bridge.pusher.secret?.value == "xyz")
        #expect(bridge.pusher.userInfoJSON == #"{"n":2,"team":"ops"}"# || bridge.pusher.userInfoJSON == #"{"team":"ops","n":2}"#)
        #expect(bridge.mqtt.username == "${literal}")
    }

    @Test func errorsAreCollectedNotStoppedAtTheFirst() {
        let text = "[daemon]\nlog_level = \"loud\"\nshutdown_grace = \"soon\"\n[[bridge]]\nname = \"BAD\"\n"
        let errors = Fixture.errors(text)
        #expect(errors.count == 4)
        #expect(errors.allSatisfy { $0.hasPrefix("/etc/bridges.conf:") })
    }
}

@Suite struct UnsafeTOMLValueTests {
    /// The guard only catches what toml++ would assert on: valid dates and date-times, and dates
    /// inside strings, comments or longer bare words, pass through to toml++.
    @Test(arguments: [
        "x = 1979-05-27T07:32:00Z", "x = 1979-05-27t07:32:00", "x = 1979-05-27 07:32:00", "x = 1979-05-27",
        "x = \"1979-05-27Tx\"", "x = 1 # 1979-05-27Tx", "a1979-05-27Tx = 1", "x = [1979-05-27T00:00:00Z, 1]",
    ])
    func validOrHarmlessTextIsNotFlagged(_ text: String) {
        #expect(ConfigSourceMap.unsafeValue(in: text) == nil)
    }
}
