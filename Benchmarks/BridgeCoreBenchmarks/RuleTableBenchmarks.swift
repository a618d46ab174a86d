import Benchmark
import BridgeCore

/// A bridge with `count` MQTT → Pusher rules (`site/<i>/+/temperature` → `site-<i>-{1}`, each
/// with `condition` as its `where` when given) and one Pusher → MQTT rule in `payload` mode.
func benchmarkBridge(mqttRules count: Int, payload: PayloadMode, condition: WhereExpression? = nil) -> BridgeSettings {
    var rules: [BridgeRule] = []
    rules.reserveCapacity(count + 1)
    for index in 0..<count {
        guard case .success(let filter) = TopicFilter.parse("site/\(index)/+/temperature"),
            case .success(let channel) = NameTemplate.parse(
                "site-\(index)-{1}", context: .mqttMessage(captures: 1, multiLevel: false)),
            case .success(let event) = NameTemplate.parse("temperature", context: .mqttMessage(captures: 1, multiLevel: false))
        else { continue }
        rules.append(
            .mqttToPusher(
                MQTTToPusherRule(
                    name: "r\(index)", filter: filter, channel: channel, event: event,
                    conditions: PayloadConditions(condition: condition))))
    }
    if case .success(let topic) = NameTemplate.parse("dash/{channel}/{event}", context: .pusherEvent) {
        rules.append(
            .pusherToMQTT(PusherToMQTTRule(name: "prices", channel: "market-data", topic: topic, payload: payload)))
    }
    return BridgeSettings(
        name: "bench", pusher: PusherSettings(key: "k"),
        mqtt: MQTTSettings(clientID: "bench", statusTopic: "bench/status"), rules: rules)
}

func ruleTableBenchmarks() {
    let receivedAt = UTCTimestamp(millisecondsSince1970: 1_795_000_000_123)
    let payload = Array(#"{"celsius":21.5,"sensor":"kitchen"}"#.utf8)

    for ruleCount in [10, 10_000] {
        let table = RuleTable(bridge: benchmarkBridge(mqttRules: ruleCount, payload: .data))
        // A topic that matches exactly one rule, in the middle of the table.
        let topic = "site/\(ruleCount / 2)/kitchen/temperature"
        Benchmark("MQTT -> Pusher match + render, \(ruleCount) rules") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(table.route(topic: topic, payload: payload, qos: 1, retain: false, receivedAt: receivedAt))
            }
        }
        Benchmark("MQTT -> Pusher no match, \(ruleCount) rules") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(table.route(topic: "other/kitchen/temperature", payload: payload, qos: 1, retain: false, receivedAt: receivedAt))
            }
        }
    }

    // Payload rules (docs/contract.md §7.3): every rule has a `where`, one matches the topic; the
    // cost per message must not grow with the rules that do not match. Same payload as
    // `make bench-rules` (c_pub with 20 fields); `swift run -c release rules-bench` measures the
    // same cases without this package.
    var fields = #"{"seq":54321,"sent_at_ns":1795000000123456789"#
    for index in 0..<20 {
        fields += ",\"f" + (index < 10 ? "0" : "") + "\(index)\":" + ["2.5", #""m2p""#, "true", "\(42 + index)"][index % 4]
    }
    let fieldsPayload = Array((fields + "}").utf8)
    if case .success(let condition) = WhereExpression.parse("/f03 > 10 and exists /f17") {
        for ruleCount in [1, 100, 1_000, 10_000] {
            let topic = "site/\(ruleCount / 2)/kitchen/temperature"
            for (kind, table) in [
                ("plain", RuleTable(bridge: benchmarkBridge(mqttRules: ruleCount, payload: .data))),
                ("where", RuleTable(bridge: benchmarkBridge(mqttRules: ruleCount, payload: .data, condition: condition))),
            ] {
                Benchmark("MQTT -> Pusher \(kind), 20 fields, \(ruleCount) rules") { benchmark in
                    for _ in benchmark.scaledIterations {
                        blackHole(
                            table.route(topic: topic, payload: fieldsPayload, qos: 1, retain: false, receivedAt: receivedAt))
                    }
                }
            }
        }
    }

    let data = #"{"symbol":"EURUSD","bid":1.0841,"ask":1.0843,"ts":1795000000123}"#
    for mode in [PayloadMode.data, .envelope] {
        let table = RuleTable(bridge: benchmarkBridge(mqttRules: 10, payload: mode))
        Benchmark("Pusher -> MQTT \(mode) rendering") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(table.route(channel: "market-data", event: "new-price", data: data, userID: nil, receivedAt: receivedAt))
            }
        }
    }
}
