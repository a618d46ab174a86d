import BridgeCore
import Foundation
import Logging
import MQTTVocabulary
import TestSupport
import Testing

@testable import BridgeDaemon

/// `check` and `run` must agree on every config (issue 26, defect 2: `keepalive = "3s"` passed
/// `check`, then `run` exited 1 because libmosquitto refuses keep-alives under 5 s). Each value
/// below goes through both paths:
/// - `check`'s: the config loader, on a file with the value at its key;
/// - `run`'s: `BridgeRuntime.init`, which makes both clients from the settings exactly as a
///   starting bridge does (`MQTTClient` calls libmosquitto's `mosquitto_new` and sets every option;
///   the Pusher options and signer are checked), without connecting. When the loader refuses the
///   value, the start path gets it written into the loaded settings of a valid file.
///
/// `clientLimits`: keys a client checks. Their boundary values (just inside and just outside each
/// limit) must be accepted by both paths or refused by both, and the loader must name the key.
/// `bridgePolicy`: keys whose limits are the bridge's own (the clients take any value): the
/// loader's extreme accepted values must start.
@Suite struct StartValidationTests {
    struct Case: CustomTestStringConvertible, Sendable {
        /// Where the line goes: `[[bridge]]`, `[bridge.pusher]`, `[bridge.mqtt]` or after everything.
        enum Place: Sendable { case bridge, pusher, mqtt, end }
        let place: Place
        /// The TOML the loader reads.
        let line: String
        /// The same value written into the settings.
        let apply: @Sendable (inout BridgeSettings) -> Void
        /// The key the loader must name when it refuses the value.
        let key: String
        var testDescription: String { line.count > 120 ? String(line.prefix(100)) + "… (\(line.utf8.count) bytes)" : line }

        init(_ place: Place, _ line: String, key: String, _ apply: @escaping @Sendable (inout BridgeSettings) -> Void) {
            self.place = place
            self.line = line
            self.key = key
            self.apply = apply
        }
    }

    static let longest = MQTTClientLimits.maximumStringBytes
    static let key32 = String(repeating: "A", count: 43) + "="
    static let key31 = String(repeating: "A", count: 42) + "=="

    static let clientLimits: [Case] = [
        // [bridge.mqtt] keepalive: libmosquitto takes 5…65535 s.
        .init(.mqtt, #"keepalive = "3s""#, key: "mqtt.keepalive") { $0.mqtt.keepalive = .seconds(3) },
        .init(.mqtt, #"keepalive = "4999ms""#, key: "mqtt.keepalive") { $0.mqtt.keepalive = .milliseconds(4999) },
        .init(.mqtt, #"keepalive = "5s""#, key: "mqtt.keepalive") { $0.mqtt.keepalive = .seconds(5) },
        .init(.mqtt, #"keepalive = "65535s""#, key: "mqtt.keepalive") { $0.mqtt.keepalive = .seconds(65535) },
        .init(.mqtt, #"keepalive = "65535001ms""#, key: "mqtt.keepalive") { $0.mqtt.keepalive = .milliseconds(65_535_001) },
        // session_expiry: four bytes of seconds.
        .init(.mqtt, #"session_expiry = "0s""#, key: "mqtt.session_expiry") { $0.mqtt.sessionExpiry = .zero },
        // (The loader's durations stop below 10⁹ s, so the client's last value, 4294967295s, is not written.)
        .init(.mqtt, #"session_expiry = "999999999s""#, key: "mqtt.session_expiry") { $0.mqtt.sessionExpiry = .seconds(999_999_999) },
        .init(.mqtt, #"session_expiry = "4294967296s""#, key: "mqtt.session_expiry") { $0.mqtt.sessionExpiry = .seconds(4_294_967_296) },
        // port.
        .init(.mqtt, "port = 0", key: "mqtt.port") { $0.mqtt.port = 0 },
        .init(.mqtt, "port = 1", key: "mqtt.port") { $0.mqtt.port = 1 },
        .init(.mqtt, "port = 65535", key: "mqtt.port") { $0.mqtt.port = 65535 },
        .init(.mqtt, "port = 65536", key: "mqtt.port") { $0.mqtt.port = 65536 },
        // client_id: mosquitto_new's UTF-8 check, at most 65,535 bytes.
        .init(.mqtt, "client_id = \"\(String(repeating: "c", count: longest))\"", key: "mqtt.client_id") {
            $0.mqtt.clientID = String(repeating: "c", count: longest)
        },
        .init(.mqtt, "client_id = \"\(String(repeating: "c", count: longest + 1))\"", key: "mqtt.client_id") {
            $0.mqtt.clientID = String(repeating: "c", count: longest + 1)
        },
        .init(.mqtt, #"client_id = "a\u0001b""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{1}b" },
        .init(.mqtt, #"client_id = "a\u001Fb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{1F}b" },
        .init(.mqtt, #"client_id = "a\u0020b""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a b" },
        .init(.mqtt, #"client_id = "a\u007Eb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a~b" },
        .init(.mqtt, #"client_id = "a\u007Fb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{7F}b" },
        .init(.mqtt, #"client_id = "a\u009Fb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{9F}b" },
        .init(.mqtt, #"client_id = "a\u00A0b""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{A0}b" },
        .init(.mqtt, #"client_id = "a\uFDCFb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{FDCF}b" },
        .init(.mqtt, #"client_id = "a\uFDD0b""#, key: "mqtt.client_id") { $0.mqtt.clientID = scalars("a", 0xFDD0, "b") },
        .init(.mqtt, #"client_id = "a\uFDEFb""#, key: "mqtt.client_id") { $0.mqtt.clientID = scalars("a", 0xFDEF, "b") },
        .init(.mqtt, #"client_id = "a\uFDF0b""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{FDF0}b" },
        .init(.mqtt, #"client_id = "a\uFFFDb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{FFFD}b" },
        .init(.mqtt, #"client_id = "a\uFFFEb""#, key: "mqtt.client_id") { $0.mqtt.clientID = scalars("a", 0xFFFE, "b") },
        .init(.mqtt, #"client_id = "a\U0010FFFDb""#, key: "mqtt.client_id") { $0.mqtt.clientID = "a\u{10FFFD}b" },
        .init(.mqtt, #"client_id = "a\U0010FFFFb""#, key: "mqtt.client_id") { $0.mqtt.clientID = scalars("a", 0x10FFFF, "b") },
        // username: mosquitto_username_pw_set's UTF-8 check and length; a password needs one.
        .init(.mqtt, #"username = "u\u0001""#, key: "mqtt.username") { $0.mqtt.username = "u\u{1}" },
        .init(.mqtt, #"username = "u\u00A0""#, key: "mqtt.username") { $0.mqtt.username = "u\u{A0}" },
        .init(.mqtt, "username = \"\(String(repeating: "u", count: longest))\"", key: "mqtt.username") {
            $0.mqtt.username = String(repeating: "u", count: longest)
        },
        .init(.mqtt, "username = \"\(String(repeating: "u", count: longest + 1))\"", key: "mqtt.username") {
            $0.mqtt.username = String(repeating: "u", count: longest + 1)
        },
        .init(.mqtt, #"password = "p""#, key: "mqtt.password") { $0.mqtt.password = Secret("p") },
        .init(.mqtt, "username = \"u\"\npassword = \"p\"", key: "mqtt.password") {
            $0.mqtt.username = "u"
            $0.mqtt.password = Secret("p")
        },
        // status_topic: the Last Will's topic (mosquitto_will_set).
        .init(.mqtt, #"status_topic = "s/\u0001""#, key: "mqtt.status_topic") { $0.mqtt.statusTopic = "s/\u{1}" },
        .init(.mqtt, #"status_topic = "s/\u0085""#, key: "mqtt.status_topic") { $0.mqtt.statusTopic = "s/\u{85}" },
        .init(.mqtt, #"status_topic = "s/\u00A0""#, key: "mqtt.status_topic") { $0.mqtt.statusTopic = "s/\u{A0}" },
        .init(.mqtt, #"status_topic = "s/+""#, key: "mqtt.status_topic") { $0.mqtt.statusTopic = "s/+" },
        .init(.mqtt, "status_topic = \"\(String(repeating: "s", count: longest))\"", key: "mqtt.status_topic") {
            $0.mqtt.statusTopic = String(repeating: "s", count: longest)
        },
        .init(.mqtt, "status_topic = \"\(String(repeating: "s", count: longest + 1))\"", key: "mqtt.status_topic") {
            $0.mqtt.statusTopic = String(repeating: "s", count: longest + 1)
        },
        // In a cluster the client id (`-node-1`: 7 bytes more) and the cluster's topics are derived (docs/contract.md §7.4).
        .init(
            .mqtt, "client_id = \"\(String(repeating: "c", count: longest - 7))\"\n\(cluster)", key: "mqtt.client_id"
        ) {
            $0.mqtt.clientID = String(repeating: "c", count: longest - 7)
            $0.cluster = ClusterSettings(group: "g", instance: "node-1")
        },
        .init(
            .mqtt, "client_id = \"\(String(repeating: "c", count: longest - 6))\"\n\(cluster)", key: "mqtt.client_id"
        ) {
            $0.mqtt.clientID = String(repeating: "c", count: longest - 6)
            $0.cluster = ClusterSettings(group: "g", instance: "node-1")
        },
        .init(.end, "\(cluster)\nmembership_topic = \"\(memberTopic(extra: 0))\"", key: "cluster.membership_topic") {
            $0.cluster = ClusterSettings(group: "g", instance: "node-1", membershipTopic: memberTopic(extra: 0))
        },
        .init(.end, "\(cluster)\nmembership_topic = \"\(memberTopic(extra: 1))\"", key: "cluster.membership_topic") {
            $0.cluster = ClusterSettings(group: "g", instance: "node-1", membershipTopic: memberTopic(extra: 1))
        },
        // [bridge.reconnect]: ReconnectPolicy.problems, for both clients.
        .init(.end, "[bridge.reconnect]\nmultiplier = 0.999", key: "reconnect.multiplier") { $0.reconnect.multiplier = 0.999 },
        .init(.end, "[bridge.reconnect]\nmultiplier = 1", key: "reconnect.multiplier") { $0.reconnect.multiplier = 1 },
        .init(.end, "[bridge.reconnect]\njitter = 1.0", key: "reconnect.jitter") { $0.reconnect.jitter = 1 },
        .init(.end, "[bridge.reconnect]\njitter = 1.001", key: "reconnect.jitter") { $0.reconnect.jitter = 1.001 },
        .init(.end, "[bridge.reconnect]\ninitial_delay = \"120s\"", key: "reconnect") { $0.reconnect.initialDelay = .seconds(120) },
        .init(.end, "[bridge.reconnect]\ninitial_delay = \"121s\"", key: "reconnect") { $0.reconnect.initialDelay = .seconds(121) },
        // [bridge.pusher]: PusherClientOptions.problems and the signer.
        .init(.pusher, #"activity_timeout = "999ms""#, key: "pusher.activity_timeout") { $0.pusher.activityTimeout = .milliseconds(999) },
        .init(.pusher, #"activity_timeout = "1s""#, key: "pusher.activity_timeout") { $0.pusher.activityTimeout = .seconds(1) },
        .init(.pusher, #"pong_timeout = "99ms""#, key: "pusher.pong_timeout") { $0.pusher.pongTimeout = .milliseconds(99) },
        .init(.pusher, #"pong_timeout = "100ms""#, key: "pusher.pong_timeout") { $0.pusher.pongTimeout = .milliseconds(100) },
        .init(.pusher, "port = 0", key: "pusher.port") { $0.pusher.port = 0 },
        .init(.pusher, "port = 1", key: "pusher.port") {
            $0.pusher.port = 1
            $0.pusher.restPort = 1
        },
        .init(.pusher, "port = 65535", key: "pusher.port") {
            $0.pusher.port = 65535
            $0.pusher.restPort = 65535
        },
        .init(.pusher, "port = 65536", key: "pusher.port") { $0.pusher.port = 65536 },
        .init(.pusher, "rest_port = 0", key: "pusher.rest_port") { $0.pusher.restPort = 0 },
        .init(.pusher, "rest_port = 1", key: "pusher.rest_port") { $0.pusher.restPort = 1 },
        .init(.pusher, "rest_port = 65536", key: "pusher.rest_port") { $0.pusher.restPort = 65536 },
        .init(.pusher, "encryption_master_key_base64 = \"\(key32)\"", key: "pusher.encryption_master_key_base64") {
            $0.pusher.encryptionMasterKey = Secret(key32)
        },
        .init(.pusher, "encryption_master_key_base64 = \" \(key32)\t\"", key: "pusher.encryption_master_key_base64") {
            $0.pusher.encryptionMasterKey = Secret(key32)
        },
        .init(.pusher, "encryption_master_key_base64 = \"\(key31)\"", key: "pusher.encryption_master_key_base64") {
            $0.pusher.encryptionMasterKey = Secret(key31)
        },
        .init(.pusher, #"user_info = { name = "a\u0001b", list = [1, 2.5, -0.0, 1e300, true, { x = [] }] }"#, key: "pusher.user_info") {
            $0.pusher.userInfoJSON = #"{"list":[1,2.5,-0.0,1e+300,true,{"x":[]}],"name":"a\u0001b"}"#
        },
        .init(.pusher, "user_info = 5", key: "pusher.user_info") { $0.pusher.userInfoJSON = "5" },
    ]

    static let bridgePolicy: [Case] = [
        .init(.end, "[bridge.buffer]\npersist = false\nmax_messages = 1\nmax_bytes = \"1KiB\"", key: "buffer") {
            $0.buffer.persist = false
            $0.buffer.maxMessages = 1
            $0.buffer.maxBytes = 1024
        },
        .init(
            .end, "[bridge.buffer]\npersist = false\nmax_messages = 100000000\nmax_bytes = \"1024GiB\"\noverflow = \"backpressure\"",
            key: "buffer"
        ) {
            $0.buffer.persist = false
            $0.buffer.maxMessages = 100_000_000
            $0.buffer.maxBytes = 1 << 40
            $0.buffer.overflow = .backpressure
        },
        .init(.pusher, "api_lanes = 1\nmax_event_bytes = 1", key: "pusher") {
            $0.pusher.apiLanes = 1
            $0.pusher.maxEventBytes = 1
        },
        .init(.pusher, "api_lanes = 64\nmax_event_bytes = \"10MiB\"", key: "pusher") {
            $0.pusher.apiLanes = 64
            $0.pusher.maxEventBytes = 10 * 1024 * 1024
        },
        .init(.pusher, "user_id = \"\(String(repeating: "u", count: 128))\"", key: "pusher.user_id") {
            $0.pusher.userID = String(repeating: "u", count: 128)
        },
        .init(.pusher, #"activity_timeout = "24h""#, key: "pusher.activity_timeout") { $0.pusher.activityTimeout = .seconds(86400) },
        .init(.end, "[bridge.reconnect]\ninitial_delay = \"1ms\"\nmax_delay = \"1ms\"\nstable_after = \"1ms\"", key: "reconnect") {
            $0.reconnect.initialDelay = .milliseconds(1)
            $0.reconnect.maxDelay = .milliseconds(1)
            $0.reconnect.stableAfter = .milliseconds(1)
        },
        // The dead-letter store's bound (docs/contract.md §8.3).
        .init(.bridge, "max_dead_letters = 1", key: "max_dead_letters") { $0.maxDeadLetters = 1 },
        .init(.bridge, "max_dead_letters = 10000000", key: "max_dead_letters") { $0.maxDeadLetters = 10_000_000 },
    ]

    static let cluster = "[bridge.cluster]\ngroup = \"g\"\ninstance = \"node-1\""

    /// A membership topic whose longest topic below it (a snapshot request to a member with a
    /// 64-byte name) is `extra` bytes over the limit.
    static func memberTopic(extra: Int) -> String {
        String(repeating: "m", count: MQTTClientLimits.maximumStringBytes + extra - "/resync/".utf8.count - 64)
    }

    /// A valid file; `pusher`, `mqtt` and `end` go at the end of their tables.
    static func config(bridge: String = "", pusher: String = "", mqtt: String = "", end: String = "") -> String {
        """
        [daemon]
        metrics = ""
        [[bridge]]
        name = "b"
        \(bridge)
        [bridge.pusher]
        key = "app-key"
        app_id = "1"
        secret = "app-secret"
        host = "127.0.0.1"
        \(pusher.hasPrefix("port =") ? "" : "port = 6001")
        tls = false
        \(pusher)
        [bridge.mqtt]
        host = "127.0.0.1"
        \(mqtt)
        \(end)
        """
    }

    static func config(with testCase: Case) -> String {
        switch testCase.place {
        case .bridge: config(bridge: testCase.line)
        case .pusher: config(pusher: testCase.line)
        case .mqtt: config(mqtt: testCase.line)
        case .end: config(end: testCase.line)
        }
    }

    static let environment = ConfigEnvironment.empty

    /// `check`'s verdict: the loaded bridge, or the diagnostics.
    static func check(_ text: String) -> Result<BridgeConfiguration, ConfigError> {
        Result { () throws(ConfigError) in try ConfigLoader.parse(text, file: "/etc/bridges.conf", environment: environment) }
    }

    /// `run`'s verdict on one bridge: nil when it starts, else why not. Spools off: nothing on disk.
    static func start(_ bridge: BridgeSettings, daemon: DaemonSettings) -> String? {
        var bridge = bridge
        bridge.buffer.persist = false
        do {
            _ = try BridgeRuntime(
                settings: bridge, daemon: daemon, metrics: BridgeMetrics(), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test(arguments: clientLimits)
    func checkAndStartAgree(_ testCase: Case) throws {
        let base = try Self.check(Self.config()).get()
        var expected = base.bridges[0]
        testCase.apply(&expected)
        switch Self.check(Self.config(with: testCase)) {
        case .success(let loaded):
            // The case writes into the settings what the loader reads from the line.
            #expect(loaded.bridges[0] == expected, "the case's settings differ from the loader's")
            let refusal = Self.start(loaded.bridges[0], daemon: loaded.daemon)
            #expect(refusal == nil, "check accepts \(testCase.line), but the bridge does not start: \(refusal ?? "")")
        case .failure(let error):
            let refusal = Self.start(expected, daemon: base.daemon)
            #expect(refusal != nil, "check refuses it (\(error)), but the bridge starts with it")
            #expect(
                error.diagnostics.contains { $0.keyPath == "bridge.b.\(testCase.key)" && $0.line != nil },
                "not refused at bridge.b.\(testCase.key) with a line: \(error)")
        }
    }

    @Test(arguments: bridgePolicy)
    func theLoadersExtremesStart(_ testCase: Case) throws {
        let loaded = try Self.check(Self.config(with: testCase)).get()
        var expected = try Self.check(Self.config()).get().bridges[0]
        testCase.apply(&expected)
        #expect(loaded.bridges[0] == expected, "the case's settings differ from the loader's")
        let refusal = Self.start(loaded.bridges[0], daemon: loaded.daemon)
        #expect(refusal == nil, "check accepts \(testCase.line), but the bridge does not start: \(refusal ?? "")")
    }

    /// Should a client still refuse a loaded config (the loader missed a limit), `run` says "invalid
    /// config" and exits 78, which the unit does not restart, instead of 1 (docs/contract.md §3).
    @Test func aBridgeItsClientRefusesMakesRunExit78() async throws {
        var configuration = try Self.check(Self.config()).get()
        configuration.bridges[0].buffer.persist = false
        configuration.bridges[0].mqtt.keepalive = .seconds(3)
        let daemon = Daemon(
            configPath: "/etc/bridges.conf", notifier: SystemdNotifier(environment: [:]),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        #expect(await daemon.run(configuration: configuration) == .invalidConfig)
    }

    /// Each key of `clientLimits` is probed on both sides of its limits: with accepted values only,
    /// a start that refuses more than `check` could hide; with refused values only, the reverse.
    @Test func everyClientLimitIsProbedOnBothSides() {
        var verdicts: [String: Set<Bool>] = [:]
        for testCase in Self.clientLimits {
            let accepted = (try? Self.check(Self.config(with: testCase)).get()) != nil
            verdicts[testCase.key, default: []].insert(accepted)
        }
        for (key, seen) in verdicts {
            #expect(seen == [true, false], "\(key): only \(seen) probed")
        }
    }
}

/// `prefix`, the scalar `value` and `suffix`: Swift's `\u{…}` does not take noncharacters.
func scalars(_ prefix: String, _ value: UInt32, _ suffix: String) -> String {
    var text = prefix
    text.unicodeScalars.append(Unicode.Scalar(value)!)
    return text + suffix
}
