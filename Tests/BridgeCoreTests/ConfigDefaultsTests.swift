import Backoff
import Testing

@testable import BridgeCore

@Suite("Config defaults and source lines")
struct ConfigDefaultsTests {
    @Test func aByteOrderMarkIsIgnored() throws {
        let text = "[[bridge]]\nname = \"bom\"\n[bridge.pusher]\nkey = \"k\"\n"
        let withMark = try Fixture.parse("\u{FEFF}" + text)
        #expect(withMark.bridges.map(\.name) == ["bom"])
        #expect(withMark.bridges == (try Fixture.parse(text)).bridges)
    }

    @Test func minimalBridgeGetsTheDocumentedDefaults() throws {
        let configuration = try Fixture.parse("[[bridge]]\nname = \"min\"\n[bridge.pusher]\nkey = \"k\"\n")
        #expect(configuration.daemon == DaemonSettings())
        #expect(configuration.daemon.metrics == ListenAddress(host: "127.0.0.1", port: 9464))
        let bridge = try #require(configuration.bridges.first)
        #expect(bridge.pusher.host == "ws-mt1.pusher.com")
        #expect(bridge.pusher.restHost == "api-mt1.pusher.com")
        #expect(bridge.pusher.port == 443)
        #expect(bridge.pusher.useTLS)
        #expect(bridge.pusher.activityTimeout == .seconds(120))
        #expect(bridge.pusher.pongTimeout == .seconds(30))
        #expect(bridge.pusher.maxEventBytes == 10 * 1024)
        #expect(bridge.pusher.userID == "pusher-mqtt-bridge-min")
        #expect(bridge.mqtt.host == "localhost")
        #expect(bridge.mqtt.port == 1883)
        #expect(bridge.mqtt.clientID == "pusher-mqtt-bridge-min")
        #expect(bridge.mqtt.statusTopic == "pusher-mqtt-bridge/min/status")
        #expect(bridge.mqtt.protocolVersion == .v5)
        #expect(!bridge.mqtt.cleanSession)
        #expect(bridge.mqtt.keepalive == .seconds(30))
        #expect(bridge.mqtt.sessionExpiry == .seconds(3600))
        #expect(bridge.reconnect == ReconnectPolicy.default)
        #expect(bridge.buffer == BufferSettings())
        #expect(bridge.rules.isEmpty && bridge.presence.isEmpty)
    }

    @Test func clusterAndTLSChoosePorts() throws {
        let configuration = try Fixture.parse(
            "[daemon]\nmetrics = \"\"\n[[bridge]]\nname = \"eu\"\n[bridge.pusher]\nkey = \"k\"\ncluster = \"eu\"\n[bridge.mqtt]\ntls = true\n"
        )
        let bridge = try #require(configuration.bridges.first)
        #expect(configuration.daemon.metrics == nil)
        #expect(bridge.pusher.host == "ws-eu.pusher.com")
        #expect(bridge.mqtt.port == 8883)
    }

    @Test func authEndpointLeavesTheIdentityToTheEndpoint() throws {
        let configuration = try Fixture.parse(
            "[[bridge]]\nname = \"a\"\n[bridge.pusher]\nkey = \"k\"\nauth_endpoint = \"https://example.com/auth\"\nauth_headers = { Authorization = \"Bearer t\" }\n"
        )
        let pusher = try #require(configuration.bridges.first?.pusher)
        #expect(pusher.userID == nil)
        #expect(pusher.authHeaders == ["Authorization": "Bearer t"])
    }

    @Test func linesStayRightAfterMultiLineValues() {
        let text = """
            [[bridge]]
            name = "factory"
            [bridge.pusher]
            key = "k"
            user_info = { note = "a [ b" }
            auth_headers = { X = \"\"\"
            multi [ line { \"\"\" }
            [bridge.mqtt]
            username = '''
            literal [[not a header]]
            '''
            clien_id = "x"
            """
        let errors = Fixture.errors(text)
        #expect(
            errors == [
                "/etc/bridges.conf:6: error: bridge.factory.pusher.auth_headers: auth_headers only apply with auth_endpoint or user_auth_endpoint",
                // The multi-line user name ends in a newline, which the MQTT client refuses (MQTTClientLimits).
                "/etc/bridges.conf:9: error: bridge.factory.mqtt.username: contains the control character U+000A, which the MQTT client (libmosquitto) refuses",
                "/etc/bridges.conf:12: error: bridge.factory.mqtt.clien_id: unknown key 'clien_id' (did you mean 'client_id'?)",
            ])
    }
}
