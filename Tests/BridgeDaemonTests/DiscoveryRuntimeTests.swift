import BridgeCore
import TestSupport
import Testing

@testable import BridgeDaemon

/// The daemon's side of channel discovery that needs no server (docs/contract.md §7.1); the
/// end-to-end behaviour is in Tests/e2e/test_discovery.py.
@Suite struct DiscoveryRuntimeTests {
    static let config = """
        [[bridge]]
        name = "f"
        [bridge.pusher]
        key = "k"
        app_id = "1"
        secret = "s"
        host = "127.0.0.1"
        [bridge.mqtt]
        host = "127.0.0.1"
        [[bridge.rule]]
        name = "devices"
        from = "pusher"
        channel_prefix = "private-device-"
        topic = "fleet/{suffix}"
        [[bridge.presence]]
        channel_prefix = "presence-room-"
        topic = "rooms/{suffix}"
        """

    @Test func discoveryFamiliesHaveZeroSeriesFromTheStart() throws {
        let settings = try #require(
            ConfigLoader.parse(
                Self.config, file: "b.conf", environment: .empty
            ).bridges.first)
        let metrics = BridgeMetrics()
        metrics.registerZeroSeries(for: settings)
        let scrape = String(decoding: metrics.render(), as: UTF8.self)
        for needle in [
            #"pusher_mqtt_bridge_discovered_channels{bridge="f",rule="devices"} 0"#,
            #"pusher_mqtt_bridge_discovered_channels{bridge="f",rule="presence:presence-room-"} 0"#,
            #"pusher_mqtt_bridge_discovery_skipped_total{bridge="f",rule="devices"} 0"#,
            #"pusher_mqtt_bridge_discovery_skipped_total{bridge="f",rule="presence:presence-room-"} 0"#,
        ] {
            #expect(scrape.contains(needle), "missing \(needle)")
        }
    }

    @Test func subscriptionCountEventsAreRead() {
        #expect(BridgeRuntime.subscriptionCount(#"{"subscription_count":3}"#) == 3)
        #expect(BridgeRuntime.subscriptionCount(#"{"subscription_count":"12"}"#) == 12)
        #expect(BridgeRuntime.subscriptionCount(#"{"other":1}"#) == nil)
        #expect(BridgeRuntime.subscriptionCount("not json") == nil)
        #expect(BridgeRuntime.subscriptionCount(nil) == nil)
    }
}
