import MQTTVocabulary
import Testing

@testable import BridgeCore

/// The loader refuses, at the key, what the two clients refuse when a bridge starts (issue 26,
/// defect 2: `keepalive = "3s"` passed `check` and made `run` exit 1). The limits live in
/// `MQTTClientLimits` and `PusherClientLimits`; Tests/BridgeDaemonTests/StartValidationTests.swift
/// compares the loader with the clients themselves.
@Suite struct ClientLimitsConfigTests {
    /// `Fixture.config` puts `mqtt` on line 15 and `pusher` on line 11.
    private let file = "/etc/bridges.conf"

    @Test func aKeepaliveBelowTheClientsMinimumIsRefusedAtItsKey() {
        #expect(
            Fixture.errors(Fixture.config(mqtt: "keepalive = \"3s\""))
                == ["\(file):15: error: bridge.factory.mqtt.keepalive: must be between 5s and 65535s (the MQTT client's limits)"])
    }

    @Test(
        arguments: [
            ("0s", nil), ("4s", nil), ("4999ms", nil), ("5s", .seconds(5)), ("5001ms", .milliseconds(5001)),
            ("65535s", .seconds(65535)), ("65535001ms", nil), ("65536s", nil),
        ] as [(String, Duration?)])
    func keepaliveBoundaries(text: String, accepted: Duration?) throws {
        let config = Fixture.config(mqtt: "keepalive = \"\(text)\"")
        if let accepted {
            #expect(try Fixture.parse(config).bridges[0].mqtt.keepalive == accepted)
        } else {
            #expect(Fixture.errors(config).map { $0.hasPrefix("\(file):15: error: bridge.factory.mqtt.keepalive: ") } == [true])
        }
    }

    @Test(arguments: [
        ("session_expiry = \"0s\"", true), ("session_expiry = \"999999999s\"", true), ("session_expiry = \"4294967296s\"", false),
    ])
    func sessionExpiryBoundaries(line: String, accepted: Bool) {
        #expect(Fixture.errors(Fixture.config(mqtt: line)).isEmpty == accepted)
    }

    /// TOML escapes for what libmosquitto's `mosquitto_validate_utf8` refuses, and neighbours it takes.
    static let refusedText = [
        #"\u0001"#, #"\t"#, #"\u001F"#, #"\u007F"#, #"\u0085"#, #"\u009F"#, #"\uFDD0"#, #"\uFDEF"#, #"\uFFFE"#, #"\U0001FFFF"#,
    ]
    static let acceptedText = [#"\u0020"#, #"\u007E"#, #"\u00A0"#, "é", #"\uFDCF"#, #"\uFDF0"#, #"\uFFFD"#, #"\U0001F600"#]

    @Test(arguments: refusedText)
    func textTheMQTTClientRefusesIsRefusedInEveryMQTTString(escape: String) {
        let cases: [(mqtt: String, extra: String, key: String)] = [
            ("client_id = \"a\(escape)b\"", "", "bridge.factory.mqtt.client_id"),
            ("username = \"a\(escape)b\"", "", "bridge.factory.mqtt.username"),
            ("status_topic = \"a/\(escape)\"", "", "bridge.factory.mqtt.status_topic"),
            ("dead_letter_topic = \"a/\(escape)\"", "", "bridge.factory.mqtt.dead_letter_topic"),
            (
                "", "[[bridge.rule]]\nname = \"r\"\nfrom = \"pusher\"\nchannel = \"c\"\ntopic = \"a/\(escape)/{event}\"",
                "bridge.factory.rule.r.topic"
            ),
            (
                "", "[[bridge.rule]]\nname = \"r\"\nfrom = \"mqtt\"\ntopic = \"a/\(escape)/+\"\nchannel = \"c\"\nevent = \"e\"",
                "bridge.factory.rule.r.topic"
            ),
            ("", "[[bridge.presence]]\nchannel = \"presence-a\"\ntopic = \"p/\(escape)\"", "bridge.factory.presence[1].topic"),
        ]
        for (mqtt, extra, key) in cases {
            let errors = Fixture.errors(Fixture.config(mqtt: mqtt, extra: extra))
            #expect(errors.count == 1, "\(key): \(errors)")
            #expect(errors.first?.contains(": error: \(key): ") == true, "\(errors)")
            #expect(errors.first?.contains("which the MQTT client (libmosquitto) refuses") == true, "\(errors)")
        }
    }

    @Test(arguments: acceptedText)
    func textTheMQTTClientTakesIsAccepted(escape: String) throws {
        let config = Fixture.config(
            mqtt: "client_id = \"a\(escape)b\"\nusername = \"u\(escape)\"\nstatus_topic = \"s/\(escape)\"",
            extra: "[[bridge.rule]]\nname = \"r\"\nfrom = \"mqtt\"\ntopic = \"a/\(escape)/+\"\nchannel = \"c\"\nevent = \"e\"")
        #expect(Fixture.errors(config) == [])
    }

    @Test func aClientIDAtTheLengthLimitIsAcceptedAndOneByteMoreIsNot() throws {
        let longest = String(repeating: "x", count: MQTTClientLimits.maximumStringBytes)
        #expect(try Fixture.parse(Fixture.config(mqtt: "client_id = \"\(longest)\"")).bridges[0].mqtt.clientID == longest)
        #expect(
            Fixture.errors(Fixture.config(mqtt: "client_id = \"\(longest)x\""))
                == ["\(file):15: error: bridge.factory.mqtt.client_id: is longer than 65535 bytes"])
    }

    @Test func aPasswordWithARefusedUsernameIsOneError() {
        let errors = Fixture.errors(Fixture.config(mqtt: "username = \"a\\u0001\"\npassword = \"p\""))
        #expect(errors.count == 1)
        #expect(errors.first?.contains("bridge.factory.mqtt.username") == true)
    }

    /// In a cluster the client id gets `-<instance>` and the Will goes below `membership_topic`:
    /// both derived values must still fit (docs/contract.md §7.4).
    @Test func derivedClusterIdentitiesMustFitTheClientsLimits() {
        let cluster = "[bridge.cluster]\ngroup = \"g\"\ninstance = \"node-1\""
        let longID = String(repeating: "x", count: MQTTClientLimits.maximumStringBytes - "-node-1".utf8.count)
        #expect(Fixture.errors(Fixture.config(mqtt: "client_id = \"\(longID)\"", extra: cluster)) == [])
        #expect(
            Fixture.errors(Fixture.config(mqtt: "client_id = \"\(longID)x\"", extra: cluster))
                == [
                    "\(file):15: error: bridge.factory.mqtt.client_id: with [bridge.cluster] the client id is client_id-<instance>, which is longer than 65535 bytes"
                ])
        // The longest topic below it is a snapshot request to a member with a 64-byte name.
        let longTopic = String(repeating: "t", count: MQTTClientLimits.maximumStringBytes - "/resync/".utf8.count - 64)
        #expect(Fixture.errors(Fixture.config(extra: cluster + "\nmembership_topic = \"\(longTopic)\"")) == [])
        let errors = Fixture.errors(Fixture.config(extra: cluster + "\nmembership_topic = \"\(longTopic)t\""))
        #expect(
            errors == [
                "\(file):20: error: bridge.factory.cluster.membership_topic: the cluster publishes to <membership_topic>/resync/<member>, which is longer than 65535 bytes"
            ])
        // With a discovery rule of a longer name, its list's parts: `discovered/<rule>/<part>`,
        // part up to max_channels.
        let name = String(repeating: "d", count: 80)
        let rule = """

            [[bridge.rule]]
            name = "\(name)"
            from = "pusher"
            channel_prefix = "private-device-"
            max_channels = 100000
            topic = "devices/{channel}"
            """
        let partTopic = String(repeating: "t", count: MQTTClientLimits.maximumStringBytes - "/discovered/\(name)/100000".utf8.count)
        #expect(Fixture.errors(Fixture.config(extra: cluster + "\nmembership_topic = \"\(partTopic)\"" + rule)) == [])
        #expect(
            Fixture.errors(Fixture.config(extra: cluster + "\nmembership_topic = \"\(partTopic)t\"" + rule))
                == [
                    "\(file):20: error: bridge.factory.cluster.membership_topic: the cluster publishes to <membership_topic>/discovered/\(name)/<part>, which is longer than 65535 bytes"
                ])
    }

    @Test(arguments: [
        ("activity_timeout = \"999ms\"", "bridge.factory.pusher.activity_timeout: must be at least 1s"),
        ("activity_timeout = \"1s\"", nil),
        ("pong_timeout = \"99ms\"", "bridge.factory.pusher.pong_timeout: must be at least 100ms"),
        ("pong_timeout = \"100ms\"", nil),
    ])
    func pusherTimeoutBoundaries(line: String, error: String?) {
        #expect(Fixture.errors(Fixture.config(pusher: line)) == (error.map { ["\(file):11: error: \($0)"] } ?? []))
    }

    /// The loader used to decode the key without the spaces around it but keep them, and the
    /// client's decoder refused the kept text: `check` passed, `run` exited 1.
    @Test func anEncryptionMasterKeyIsKeptAsItWasDecoded() throws {
        let key = String(repeating: "A", count: 43) + "="
        let configuration = try Fixture.parse(Fixture.config(pusher: "encryption_master_key_base64 = \"  \(key)\t\""))
        #expect(configuration.bridges[0].pusher.encryptionMasterKey?.value == key)
    }
}
