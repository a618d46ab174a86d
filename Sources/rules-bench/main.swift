// rules-bench: release-mode cost of `RuleTable.route` for MQTT → Pusher, per message, as the
// number of rules grows (payload rules, docs/contract.md §7.3; docs/history/benchmarks.md, "Payload rules").
//
//     swift build -c release --product rules-bench && .build/release/rules-bench [--json] [--routes N]
//
// A table holds `count` rules with distinct filters `site/<i>/+/temperature`; one message topic,
// `site/<count/2>/kitchen/temperature`, matches exactly one of them. Three kinds of rule:
//   plain       channel `site-<i>-{1}`, no `where`;
//   where       the same plus `where = "/f03 > 10 and exists /f17"` on every rule;
//   where+json  the same plus `{json:/f05}` in the channel: `site-<i>-{json:/f05}-{1}`.
// Payloads are those of `make bench-rules` (Benchmarks/bridge/c_pub.c with 20 fields): the
// smallest such JSON (~250 B) and one padded to 1 KB. Every routed message must yield exactly one
// event (checked). Each case times N routes with ContinuousClock, 7 times; the median is printed
// as ns per message. With --json, one JSON object per case and line instead of the table.
import BridgeCore
import Foundation

/// One kind of rule set.
enum RuleKind: String, CaseIterable {
    /// No payload rule.
    case plain
    /// A `where` on every rule.
    case `where`
    /// A `where` and a `{json:…}` in the channel template on every rule.
    case whereJSON = "where+json"
}

/// Rule parse errors are programming errors of this benchmark, reported and fatal.
struct SetupError: Error, CustomStringConvertible {
    /// What could not be built.
    var description: String
}

/// `count` MQTT → Pusher rules of `kind` with filters `site/<i>/+/temperature`.
func bridge(rules count: Int, kind: RuleKind) throws -> BridgeSettings {
    let context = NameTemplate.Context.mqttMessage(captures: 1, multiLevel: false)
    let condition: WhereExpression?
    switch WhereExpression.parse("/f03 > 10 and exists /f17") {
    case .success(let expression): condition = kind == .plain ? nil : expression
    case .failure(let error): throw SetupError(description: "where: \(error)")
    }
    guard case .success(let event) = NameTemplate.parse("temperature", context: context) else {
        throw SetupError(description: "event template")
    }
    var rules: [BridgeRule] = []
    rules.reserveCapacity(count)
    for index in 0..<count {
        let channelSource = kind == .whereJSON ? "site-\(index)-{json:/f05}-{1}" : "site-\(index)-{1}"
        guard case .success(let filter) = TopicFilter.parse("site/\(index)/+/temperature"),
            case .success(let channel) = NameTemplate.parse(channelSource, context: context)
        else { throw SetupError(description: "rule \(index)") }
        rules.append(
            .mqttToPusher(
                MQTTToPusherRule(
                    name: "r\(index)", filter: filter, channel: channel, event: event, qos: 0,
                    conditions: PayloadConditions(condition: condition))))
    }
    return BridgeSettings(
        name: "bench", pusher: PusherSettings(key: "k"),
        mqtt: MQTTSettings(clientID: "bench", statusTopic: "bench/status"), rules: rules)
}

/// The payload c_pub writes with 20 fields: `{"seq":…,"sent_at_ns":…,"f00":2.5,…,"pad":"x…"}`,
/// padded to `size` (0: no pad, the smallest).
func payload(size: Int) -> [UInt8] {
    var text = #"{"seq":54321,"sent_at_ns":1795000000123456789"#
    for index in 0..<20 {
        let value = ["2.5", #""m2p""#, "true", "\(42 + index)"][index % 4]
        text += "," + #""f"# + (index < 10 ? "0" : "") + "\(index)" + #"":"# + value
    }
    let padding = size - text.utf8.count - 10
    text += padding >= 0 ? #","pad":""# + String(repeating: "x", count: padding) + #""}"# : "}"
    return Array(text.utf8)
}

func nanoseconds(_ duration: Duration) -> Double {
    let parts = duration.components
    return Double(parts.seconds) * 1e9 + Double(parts.attoseconds) / 1e9
}

/// The median over 7 samples of ns per `route` of `routes` messages to the one matching rule.
func measure(table: RuleTable, topic: String, payload: [UInt8], routes: Int) throws -> (median: Double, samples: [Double]) {
    let receivedAt = UTCTimestamp(millisecondsSince1970: 1_795_000_000_123)
    let clock = ContinuousClock()
    var samples: [Double] = []
    for _ in 0..<7 {
        var events = 0
        var bytes = 0
        let start = clock.now
        for _ in 0..<routes {
            let routing = table.route(topic: topic, payload: payload, qos: 0, retain: false, receivedAt: receivedAt)
            events &+= routing.events.count
            bytes &+= routing.events.first?.channel.utf8.count ?? 0
        }
        let elapsed = clock.now - start
        guard events == routes, bytes > 0 else {
            throw SetupError(description: "\(topic): \(events) events for \(routes) messages (every message must route once)")
        }
        samples.append(nanoseconds(elapsed) / Double(routes))
    }
    return (samples.sorted()[samples.count / 2], samples)
}

let arguments = CommandLine.arguments
let json = arguments.contains("--json")
var routes = 200_000
if let flag = arguments.firstIndex(of: "--routes"), flag + 1 < arguments.count, let value = Int(arguments[flag + 1]), value > 0 {
    routes = value
}

if !json {
    print("rules-bench: \(routes) routes per sample, median of 7, ns per message")
    print("| payload | rules | plain | where | where+json | where ÷ plain | where+json ÷ plain |")
    print("|---|---|---|---|---|---|---|")
}
for size in [0, 1024] {
    let body = payload(size: size)
    for count in [1, 100, 1_000, 10_000] {
        let topic = "site/\(count / 2)/kitchen/temperature"
        var medians: [RuleKind: Double] = [:]
        for kind in RuleKind.allCases {
            let table = RuleTable(bridge: try bridge(rules: count, kind: kind))
            let result = try measure(table: table, topic: topic, payload: body, routes: routes)
            medians[kind] = result.median
            if json {
                let samples = result.samples.map { String(format: "%.1f", $0) }.joined(separator: ",")
                print(
                    #"{"payload_bytes":\#(body.count),"rules":\#(count),"kind":"\#(kind.rawValue)","#
                        + #""ns_per_message":\#(String(format: "%.1f", result.median)),"samples":[\#(samples)]}"#)
            }
        }
        if !json {
            let plain = medians[.plain] ?? 0
            let whereOnly = medians[.where] ?? 0
            let whereJSON = medians[.whereJSON] ?? 0
            func format(_ value: Double) -> String { String(format: "%.0f", value) }
            func ratio(_ value: Double) -> String { plain > 0 ? String(format: "%.2f", value / plain) : "–" }
            print(
                "| \(body.count) B | \(count) | \(format(plain)) | \(format(whereOnly)) | \(format(whereJSON)) | \(ratio(whereOnly)) | \(ratio(whereJSON)) |"
            )
        }
    }
}
