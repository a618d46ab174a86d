// metrics-bench: the cost of registering `pusher_mqtt_bridge_messages_total` series as the number of
// rules grows (issue 31, "metric registration linear"; BENCHMARKS.md).
//
//     swift build -c release --product metrics-bench && .build/release/metrics-bench
//
// For n series (n/4 rules × 4 outcomes), two ways in the same run:
//   registry  through swift-prometheus' registry, as the daemon did before (`CoreMetrics.Counter`
//             from `PrometheusMetricsFactory`): each new label set copies its family's table;
//   daemon    `BridgeMetrics.messages(bridge:rule:direction:outcome:)`, which keeps this family
//             itself (MessageCounterFamily.swift).
// Each is timed 3 times with ContinuousClock and the median printed, with µs per series; then one
// render of the daemon's 40,000 series, checked to hold every series once.
import BridgeCore
import BridgeDaemon
import CoreMetrics
import Prometheus

func median(_ samples: [Duration]) -> Duration { samples.sorted()[samples.count / 2] }

func timeRegistry(_ count: Int) -> Duration {
    let factory = PrometheusMetricsFactory(registry: PrometheusCollectorRegistry())
    let clock = ContinuousClock()
    return clock.measure {
        for index in 0..<count {
            let counter = CoreMetrics.Counter(
                label: "pusher_mqtt_bridge_messages_total",
                dimensions: [("bridge", "b"), ("rule", "r\(index / 4)"), ("direction", "mqtt_to_pusher"), ("outcome", "o\(index % 4)")],
                factory: factory)
            counter.increment()
        }
    }
}

let outcomes: [MessageOutcome] = [.delivered, .deadLettered, .dropped, .filtered]

func timeDaemon(_ count: Int) -> (Duration, BridgeMetrics) {
    let metrics = BridgeMetrics()
    let clock = ContinuousClock()
    let elapsed = clock.measure {
        for index in 0..<count {
            metrics.messages(bridge: "b", rule: "r\(index / 4)", direction: .mqttToPusher, outcome: outcomes[index % 4]).increment()
        }
    }
    return (elapsed, metrics)
}

func microseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

print("| series | registry (ms) | µs/series | daemon (ms) | µs/series | registry ÷ daemon |")
print("|---:|---:|---:|---:|---:|---:|")
var last: BridgeMetrics?
for count in [2_500, 5_000, 10_000, 20_000, 40_000] {
    let registry = median((0..<3).map { _ in timeRegistry(count) })
    var daemonSamples: [Duration] = []
    for _ in 0..<3 {
        let (elapsed, metrics) = timeDaemon(count)
        daemonSamples.append(elapsed)
        last = metrics
    }
    let daemon = median(daemonSamples)
    let (r, d) = (microseconds(registry), microseconds(daemon))
    print(
        "| \(count) | \(String(format: "%.1f", r / 1000)) | \(String(format: "%.2f", r / Double(count))) "
            + "| \(String(format: "%.1f", d / 1000)) | \(String(format: "%.2f", d / Double(count))) | \(String(format: "%.0f", r / d)) |")
}
if let last {
    let clock = ContinuousClock()
    var text: [UInt8] = []
    let elapsed = clock.measure { text = last.render() }
    let lines = text.split(separator: UInt8(ascii: "\n")).filter { $0.starts(with: Array("pusher_mqtt_bridge_messages_total{".utf8)) }
    precondition(lines.count == 40_000, "rendered \(lines.count) series, not 40,000")
    print("render of 40,000 series: \(String(format: "%.1f", microseconds(elapsed) / 1000)) ms, \(text.count) bytes")
}
