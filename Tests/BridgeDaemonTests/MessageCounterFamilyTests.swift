import Testing

@testable import BridgeDaemon

/// `messages_total`, kept by the daemon instead of the Prometheus registry (MessageCounterFamily.swift).
@Suite struct MessageCounterFamilyTests {
    static func text(_ metrics: BridgeMetrics) -> String { String(decoding: metrics.render(), as: UTF8.self) }

    /// Expected: one `# TYPE` line, then each series once, in the order they were made, with its
    /// count; the registry's own metrics are still there; asking again gives the same counter.
    @Test func seriesAreRenderedOnceInTheOrderTheyWereMade() {
        let metrics = BridgeMetrics()
        metrics.messages(bridge: "b", rule: "r2", direction: .mqttToPusher, outcome: .delivered).increment(by: 3)
        metrics.messages(bridge: "b", rule: "r1", direction: .pusherToMQTT, outcome: .dropped).increment()
        metrics.messages(bridge: "b", rule: "r2", direction: .mqttToPusher, outcome: .delivered).increment(by: 2)
        metrics.reconnects(bridge: "b", side: .mqtt).increment()
        let lines = Self.text(metrics).split(separator: "\n").map(String.init)
        #expect(lines.filter { $0 == "# TYPE pusher_mqtt_bridge_messages_total counter" }.count == 1)
        #expect(
            lines.filter { $0.hasPrefix("pusher_mqtt_bridge_messages_total{") } == [
                #"pusher_mqtt_bridge_messages_total{bridge="b",rule="r2",direction="mqtt_to_pusher",outcome="delivered"} 5"#,
                #"pusher_mqtt_bridge_messages_total{bridge="b",rule="r1",direction="pusher_to_mqtt",outcome="dropped"} 1"#,
            ])
        #expect(lines.contains { $0.hasPrefix("pusher_mqtt_bridge_reconnects_total{") && $0.hasSuffix(" 1") })
    }

    @Test func labelValuesAreEscapedAsTheTextFormatWants() {
        var buffer: [UInt8] = []
        MessageCounterFamily.appendLabel("rule", "a\"b\\c\nd", first: true, into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == #"{rule="a\"b\\c\nd""#)
    }

    @Test func withoutSeriesTheFamilyIsNotRendered() {
        #expect(!Self.text(BridgeMetrics()).contains("messages_total"))
    }

    /// Expected: counting from several tasks at once loses no increment (the cells are atomic).
    @Test func concurrentIncrementsAreAllCounted() async {
        let metrics = BridgeMetrics()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let counter = metrics.messages(bridge: "b", rule: "r", direction: .mqttToPusher, outcome: .delivered)
                    for _ in 0..<10_000 { counter.increment() }
                }
            }
        }
        #expect(Self.text(metrics).contains(#"outcome="delivered"} 80000"#))
    }
}
