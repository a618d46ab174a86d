import MQTTVocabulary
import Testing

@testable import BridgeCore

/// `[bridge.mqtt] hosts`: a broker cluster's nodes (docs/contract.md §8.4).
@Suite struct BrokerHostsConfigTests {
    static func config(_ mqtt: String) -> String {
        """
        [[bridge]]
        name = "factory"

        [bridge.pusher]
        key = "app-key"
        host = "127.0.0.1"
        port = 6001
        tls = false

        [bridge.mqtt]
        \(mqtt)
        """
    }

    @Test func theFirstNodeIsTheHostAndTheOthersAreTheFailover() throws {
        let mqtt = try Fixture.parse(Self.config(#"hosts = ["node1:1883", "node2", "[fd00::2]:1884", "fd00::3"]"#)).bridges[0].mqtt
        #expect(mqtt.host == "node1" && mqtt.port == 1883)
        #expect(mqtt.failover.map(\.description) == ["node2:1883", "[fd00::2]:1884", "[fd00::3]:1883"])
    }

    @Test func withTLSAPortlessNodeIsOn8883() throws {
        let mqtt = try Fixture.parse(Self.config("tls = true\nhosts = [\"a\", \"b:9000\"]")).bridges[0].mqtt
        #expect(mqtt.port == 8883)
        #expect(mqtt.failover == [MQTTBrokerAddress(host: "b", port: 9000)])
    }

    @Test func withoutHostsThereIsNoFailover() throws {
        let mqtt = try Fixture.parse(Self.config(#"host = "broker""#)).bridges[0].mqtt
        #expect(mqtt.host == "broker" && mqtt.failover.isEmpty)
    }

    /// `Self.config` puts `[bridge.mqtt]`'s first line on line 11.
    @Test(arguments: [
        (
            #"hosts = ["a", "b"]"# + "\nhost = \"c\"",
            "bridge.factory.mqtt.host: set either hosts (a broker cluster's nodes) or host and port, not both"
        ),
        (
            #"hosts = ["a", "b"]"# + "\nport = 1884",
            "bridge.factory.mqtt.port: set either hosts (a broker cluster's nodes) or host and port, not both"
        ),
        ("hosts = []", #"bridge.factory.mqtt.hosts: hosts needs at least one "host:port""#),
        (#"hosts = ["a:0"]"#, #"bridge.factory.mqtt.hosts: "a:0" is not "host", "host:port" or "[IPv6]:port" with a port 1…65535"#),
        (#"hosts = ["a:x"]"#, #"bridge.factory.mqtt.hosts: "a:x" is not "host", "host:port" or "[IPv6]:port" with a port 1…65535"#),
        (#"hosts = [":1883"]"#, #"bridge.factory.mqtt.hosts: ":1883" is not "host", "host:port" or "[IPv6]:port" with a port 1…65535"#),
        (
            #"hosts = ["[fd00::1"]"#,
            #"bridge.factory.mqtt.hosts: "[fd00::1" is not "host", "host:port" or "[IPv6]:port" with a port 1…65535"#
        ),
        (#"hosts = ["a b"]"#, #"bridge.factory.mqtt.hosts: "a b" is not "host", "host:port" or "[IPv6]:port" with a port 1…65535"#),
        (#"hosts = ["a:1883", "a"]"#, "bridge.factory.mqtt.hosts: a:1883 is listed twice"),
        ("hosts = \"a:1883\"", "bridge.factory.mqtt.hosts: "),
    ])
    func badHostsAreRefusedAtTheirKey(line: String, message: String) {
        let errors = Fixture.errors(Self.config(line))
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.contains(message) == true, "\(errors)")
    }

    @Test func checkShowsTheFailoverNodes() throws {
        let configuration = try Fixture.parse(Self.config(#"hosts = ["node1:1883", "node2:1883"]"#))
        let report = CheckReport.render(configuration, file: "bridges.conf")
        #expect(report.contains("mqtt://node1:1883"), "\(report)")
        #expect(report.contains("failover to node2:1883 in turn"), "\(report)")
    }

    /// Listen addresses (`metrics`, `[daemon] webhooks`) go through the same reader as `hosts`
    /// entries, with a port required.
    @Test func listenAddressesNeedAPortAndTakeIPv6InBracketsOrSplitAtTheLastColon() {
        #expect(ListenAddress("127.0.0.1:9464") == ListenAddress(host: "127.0.0.1", port: 9464))
        #expect(ListenAddress("[::1]:9464") == ListenAddress(host: "::1", port: 9464))
        #expect(ListenAddress("::1:9464") == ListenAddress(host: "::1", port: 9464))
        for refused in ["localhost", ":80", "h:70000", "h:0", "[::1]", "[::1]9464", "a b:80", "h:x"] {
            #expect(ListenAddress(refused) == nil, "\(refused)")
        }
    }
}
