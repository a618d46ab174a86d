import BridgeCore
import Logging
import MQTTVocabulary
import TestSupport
import Testing

@testable import BridgeDaemon

/// The daemon's parts of webhooks in (docs/contract.md §7.2): zero series and the outbox's "can it
/// take these without loss" check that decides 503.
@Suite struct WebhookPartsTests {
    static func item(_ index: Int) -> OutgoingMQTT {
        OutgoingMQTT(
            publish: MQTTPublish(rule: "webhooks", topic: "p/channels/c/count", payload: Array("\(index)".utf8), qos: 1, retain: true),
            receivedAtMillis: 0)
    }

    static func outbox(_ overflow: BufferOverflowPolicy, maxMessages: Int = 3) throws -> Outbox<OutgoingMQTT> {
        try Outbox<OutgoingMQTT>(
            name: "t", limits: BufferLimits(maxMessages: maxMessages, maxBytes: 1 << 20), overflow: overflow, spoolDirectory: nil,
            logger: Logger(label: "t"))
    }

    @Test func webhookSeriesAreThereFromTheFirstScrapeOnlyForBridgesWithWebhooks() throws {
        let text = """
            [daemon]
            webhooks = "127.0.0.1:9465"
            [[bridge]]
            name = "w"
            [bridge.pusher]
            key = "k"
            secret = "s"
            [bridge.mqtt]
            host = "127.0.0.1"
            [bridge.webhooks]
            topic_prefix = "p"
            [[bridge]]
            name = "plain"
            [bridge.pusher]
            key = "k2"
            [bridge.mqtt]
            host = "127.0.0.1"
            client_id = "plain"
            """
        let configuration = try ConfigLoader.parse(
            text, file: "b.conf", environment: .empty)
        let metrics = BridgeMetrics()
        for bridge in configuration.bridges { metrics.registerZeroSeries(for: bridge) }
        let scrape = String(decoding: metrics.render(), as: UTF8.self)
        for outcome in WebhookOutcome.allCases {
            let needle = #"pusher_mqtt_bridge_webhooks_total{bridge="w",outcome="\#(outcome.rawValue)"} 0"#
            #expect(scrape.contains(needle), "missing \(needle)")
        }
        #expect(
            scrape.contains(
                #"pusher_mqtt_bridge_messages_total{bridge="w",rule="webhooks",direction="pusher_to_mqtt",outcome="delivered"} 0"#))
        #expect(
            scrape.contains(
                #"pusher_mqtt_bridge_messages_total{bridge="w",rule="webhooks",direction="pusher_to_mqtt",outcome="dropped"} 0"#))
        #expect(!scrape.contains(#"webhooks_total{bridge="plain""#))
        #expect(!scrape.contains(#"bridge="plain",rule="webhooks""#))
    }

    @Test func anOutboxTakesWithoutLossOnlyWhatFitsAndOnlyWhileOpen() throws {
        let outbox = try Self.outbox(.dropNewest)
        #expect(outbox.canTakeWithoutLoss((0..<5).map(Self.item)))  // an empty outbox always has room
        _ = outbox.append(contentsOf: (0..<2).map(Self.item))
        #expect(outbox.canTakeWithoutLoss([Self.item(2)]))
        #expect(!outbox.canTakeWithoutLoss([Self.item(2), Self.item(3)]))
        outbox.close()
        #expect(!outbox.canTakeWithoutLoss([Self.item(2)]))
    }
}
