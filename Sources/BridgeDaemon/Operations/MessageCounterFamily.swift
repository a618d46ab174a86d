import CoreMetrics
import Synchronization

/// `pusher_mqtt_bridge_messages_total{bridge,rule,direction,outcome}`, kept and rendered by the
/// daemon itself rather than by the Prometheus registry: the registry copies a metric family's
/// whole table of label sets to add one (swift-prometheus 2.4, `MetricFamily.adding`), so
/// registering n series of one family costs O(n²) — with 10,000 rules (40,000 series of this
/// family) that alone took most of a minute at start. Here adding a series is O(1) and rendering
/// O(n). Callers hold the family under ``BridgeMetrics``' lock; the counters themselves are
/// atomic and are incremented without it.
struct MessageCounterFamily {
    static let name = "pusher_mqtt_bridge_messages_total"

    /// One series' value.
    final class Cell: CounterHandler, Sendable {
        let value = Atomic<Int64>(0)

        func increment(by amount: Int64) { value.add(amount, ordering: .relaxed) }
        func reset() { value.store(0, ordering: .relaxed) }
    }

    /// The label values of one series, in the order the family renders them.
    struct Labels: Hashable {
        var bridge: String
        var rule: String
        var direction: String
        var outcome: String
    }

    private(set) var index: [Labels: Int] = [:]
    private(set) var series: [(labels: Labels, cell: Cell)] = []

    /// The cell of `labels`, made on first use.
    mutating func cell(_ labels: Labels) -> (cell: Cell, made: Bool) {
        if let position = index[labels] { return (series[position].cell, false) }
        let cell = Cell()
        index[labels] = series.count
        series.append((labels, cell))
        return (cell, true)
    }

    /// The Prometheus text exposition of the family (nothing while it has no series).
    static func render(_ series: [(labels: Labels, cell: Cell)], into buffer: inout [UInt8]) {
        guard !series.isEmpty else { return }
        buffer.append(contentsOf: "# TYPE \(name) counter\n".utf8)
        for (labels, cell) in series {
            buffer.append(contentsOf: name.utf8)
            appendLabel("bridge", labels.bridge, first: true, into: &buffer)
            appendLabel("rule", labels.rule, first: false, into: &buffer)
            appendLabel("direction", labels.direction, first: false, into: &buffer)
            appendLabel("outcome", labels.outcome, first: false, into: &buffer)
            buffer.append(contentsOf: "} \(cell.value.load(ordering: .relaxed))\n".utf8)
        }
    }

    /// `{name="value"` or `,name="value"`, the value escaped as the text format wants (`\\`, `\"`, `\n`).
    static func appendLabel(_ name: String, _ value: String, first: Bool, into buffer: inout [UInt8]) {
        buffer.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
        buffer.append(contentsOf: name.utf8)
        buffer.append(contentsOf: "=\"".utf8)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.append(contentsOf: "\\\\".utf8)
            case UInt8(ascii: "\""): buffer.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\n"): buffer.append(contentsOf: "\\n".utf8)
            default: buffer.append(byte)
            }
        }
        buffer.append(UInt8(ascii: "\""))
    }
}
