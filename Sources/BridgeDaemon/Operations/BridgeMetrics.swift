import BridgeCore
import CoreMetrics
import Locking
import Prometheus

/// The daemon's metrics (docs/contract.md §5.7), created through swift-metrics on a Prometheus registry.
///
/// Metric objects are created once per label set and cached here; hot paths keep the object
/// they got (``messages(bridge:rule:direction:outcome:)``) instead of looking it up per message.
public final class BridgeMetrics: Sendable {
    /// Which way a message travels (the bridge core's vocabulary).
    public typealias Direction = MessageDirection
    /// Which connection of a bridge.
    public typealias Side = BridgeSide
    /// What happened to a message.
    public typealias Outcome = MessageOutcome

    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// The metric objects made so far, by label set: one lock for every cache.
    private let caches = Locked(Caches())

    private struct Caches {
        var counters: [String: CoreMetrics.Counter] = [:]
        /// `messages_total` is counted per message: its cache is keyed without building a string.
        var messageCounters: [MessageKey: CoreMetrics.Counter] = [:]
        /// Its series, rendered by the daemon (MessageCounterFamily.swift: O(1) to add one).
        var messageFamily = MessageCounterFamily()
        var gauges: [String: CoreMetrics.Gauge] = [:]
        var floatingCounters: [String: CoreMetrics.FloatingPointCounter] = [:]
    }

    private struct MessageKey: Hashable {
        var bridge: String
        var rule: String
        var direction: Direction
        var outcome: Outcome
    }
    private let deliveryTimer: CoreMetrics.Timer

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["pusher_mqtt_bridge_delivery_seconds"] = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
        ]
        self.factory = factory
        deliveryTimer = CoreMetrics.Timer(label: "pusher_mqtt_bridge_delivery_seconds", dimensions: [], factory: factory)
    }

    /// `pusher_mqtt_bridge_messages_total{bridge,rule,direction,outcome}`.
    public func messages(bridge: String, rule: String, direction: Direction, outcome: Outcome) -> CoreMetrics.Counter {
        let key = MessageKey(bridge: bridge, rule: rule, direction: direction, outcome: outcome)
        return caches.withLock { caches in
            if let existing = caches.messageCounters[key] { return existing }
            let labels = MessageCounterFamily.Labels(
                bridge: bridge, rule: rule, direction: direction.rawValue, outcome: outcome.rawValue)
            let made = CoreMetrics.Counter(
                label: MessageCounterFamily.name,
                dimensions: [("bridge", bridge), ("rule", rule), ("direction", direction.rawValue), ("outcome", outcome.rawValue)],
                handler: caches.messageFamily.cell(labels).cell, factory: factory)
            caches.messageCounters[key] = made
            return made
        }
    }

    /// `pusher_mqtt_bridge_received_total{bridge,direction}`: messages that came in, once per rule
    /// that took each (once when none did); at every scrape it equals the sum of the outcomes of
    /// `messages_total` plus `buffered_messages` (docs/contract.md §7.6).
    public func received(bridge: String, direction: Direction) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_received_total", [("bridge", bridge), ("direction", direction.rawValue)])
    }

    /// `pusher_mqtt_bridge_reconnects_total{bridge,side}`.
    public func reconnects(bridge: String, side: Side) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_reconnects_total", [("bridge", bridge), ("side", side.rawValue)])
    }

    /// `pusher_mqtt_bridge_errors_total{bridge,kind}`: bad input that was survived (malformed frames,
    /// HTTP replies, config reload failures, …).
    public func errors(bridge: String, kind: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_errors_total", [("bridge", bridge), ("kind", kind)])
    }

    /// `pusher_mqtt_bridge_buffered_messages{bridge,direction}`.
    public func buffered(bridge: String, direction: Direction) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_buffered_messages", [("bridge", bridge), ("direction", direction.rawValue)])
    }

    /// `pusher_mqtt_bridge_spool_degraded{bridge,direction}`: 1 while the direction's spool cannot
    /// write and new messages wait in memory only, else 0 (docs/contract.md §7.6).
    public func spoolDegraded(bridge: String, direction: Direction) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_spool_degraded", [("bridge", bridge), ("direction", direction.rawValue)])
    }

    /// `pusher_mqtt_bridge_connection_up{bridge,side}`: 1 while connected, else 0.
    public func connectionUp(bridge: String, side: Side) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_connection_up", [("bridge", bridge), ("side", side.rawValue)])
    }

    /// `pusher_mqtt_bridge_connection_up{bridge,side="pusher",connection}`: each of a bridge's
    /// Pusher connections when it has more than one (the series without `connection` is 1 while
    /// any is up; docs/pusher-merge.md).
    public func pusherConnectionUp(bridge: String, connection: Int) -> CoreMetrics.Gauge {
        gauge(
            "pusher_mqtt_bridge_connection_up",
            [("bridge", bridge), ("side", Side.pusher.rawValue), ("connection", "\(connection)")])
    }

    /// `pusher_mqtt_bridge_pusher_gaps_total{bridge}`: gap records published (a channel no
    /// connection held for a while; docs/pusher-merge.md).
    public func pusherGaps(bridge: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_pusher_gaps_total", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_pusher_gap_seconds_total{bridge}`: the gaps' lengths, summed.
    public func pusherGapSeconds(bridge: String) -> CoreMetrics.FloatingPointCounter {
        let key = Self.key("pusher_mqtt_bridge_pusher_gap_seconds_total", [("bridge", bridge)])
        return caches.withLock { caches in
            if let existing = caches.floatingCounters[key] { return existing }
            let made = CoreMetrics.FloatingPointCounter(
                label: "pusher_mqtt_bridge_pusher_gap_seconds_total", dimensions: [("bridge", bridge)], factory: factory)
            caches.floatingCounters[key] = made
            return made
        }
    }

    /// `pusher_mqtt_bridge_throttle_targets{bridge,rule}`: targets a rule with `throttle` or
    /// `on_change` remembers (docs/contract.md §7.3).
    public func throttleTargets(bridge: String, rule: String) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_throttle_targets", [("bridge", bridge), ("rule", rule)])
    }

    /// `pusher_mqtt_bridge_throttle_targets_full_total{bridge,rule}`: messages of a new target sent
    /// unshaped because the rule already remembers `max_targets` targets.
    public func throttleTargetsFull(bridge: String, rule: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_throttle_targets_full_total", [("bridge", bridge), ("rule", rule)])
    }

    /// `pusher_mqtt_bridge_discovered_channels{bridge,rule}`: channels a `channel_prefix` rule or
    /// mirror holds (docs/contract.md §7.1; mirrors are labelled `presence:<prefix>`).
    public func discoveredChannels(bridge: String, rule: String) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_discovered_channels", [("bridge", bridge), ("rule", rule)])
    }

    /// `pusher_mqtt_bridge_discovery_skipped_total{bridge,rule}`: channels found but not joined
    /// because the rule holds `max_channels` (each counted once while it stays skipped).
    public func discoverySkipped(bridge: String, rule: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_discovery_skipped_total", [("bridge", bridge), ("rule", rule)])
    }

    /// `pusher_mqtt_bridge_cluster_members{bridge}`: the live members of the bridge's cluster that
    /// count for channel ownership, this one included while it is a member (docs/contract.md §7.4).
    public func clusterMembers(bridge: String) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_cluster_members", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_cluster_channels_held{bridge}`: the Pusher channels this member holds
    /// (subscribed, including those being handed over).
    public func clusterChannelsHeld(bridge: String) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_cluster_channels_held", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_cluster_takeovers_total{bridge}`: channels this member started holding
    /// (its share after joining, a dead member's channels, a handover to it).
    public func clusterTakeovers(bridge: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_cluster_takeovers_total", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_cluster_handovers_total{bridge,confirmed}`: channels this member let go
    /// to another holder — `confirmed="true"` after the new holder reported it subscribed,
    /// `"false"` at the 5 s handover timeout or with nobody to hand it to.
    public func clusterHandovers(bridge: String, confirmed: Bool) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_cluster_handovers_total", [("bridge", bridge), ("confirmed", confirmed ? "true" : "false")])
    }

    /// `pusher_mqtt_bridge_watchlist_online{bridge}`: the watched users Pusher reports online to
    /// the bridge's signed-in user (docs/contract.md §8.2).
    public func watchlistOnline(bridge: String) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_watchlist_online", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_webhooks_total{bridge,outcome}`: webhook requests by outcome, and the
    /// events inside accepted ones that were skipped (docs/contract.md §7.2).
    public func webhooks(bridge: String, outcome: WebhookOutcome) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_webhooks_total", [("bridge", bridge), ("outcome", outcome.rawValue)])
    }

    /// `pusher_mqtt_bridge_dead_letters_stored{bridge}`: letters the bridge's dead-letter store
    /// keeps now (docs/contract.md §8.3).
    public func deadLettersStored(bridge: String) -> CoreMetrics.Gauge {
        gauge("pusher_mqtt_bridge_dead_letters_stored", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_dead_letters_evicted_total{bridge}`: the oldest letters dropped to keep
    /// the store within `max_dead_letters`.
    public func deadLettersEvicted(bridge: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_dead_letters_evicted_total", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_dead_letters_damaged_total{bridge}`: torn or damaged records the store
    /// skipped when it was opened.
    public func deadLettersDamaged(bridge: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_dead_letters_damaged_total", [("bridge", bridge)])
    }

    /// `pusher_mqtt_bridge_dead_letters_redriven_total{bridge,outcome}`: letters a redrive took, by
    /// what became of them: `delivered`, `dead_lettered` (again, kept as a new letter),
    /// `unmatched` (no rule takes it now: kept), `unsettled` (the bridge stopped first: kept).
    public func deadLettersRedriven(bridge: String, outcome: String) -> CoreMetrics.Counter {
        counter("pusher_mqtt_bridge_dead_letters_redriven_total", [("bridge", bridge), ("outcome", outcome)])
    }

    /// The `outcome`s of `dead_letters_redriven_total`.
    public static let redriveOutcomes = ["delivered", "dead_lettered", "unmatched", "unsettled"]

    /// The `kind`s of `errors_total` a bridge counts (a test checks that every `kind:` used in
    /// Sources/BridgeDaemon is listed here, so none appears late).
    public static let errorKinds = [
        "pusher", "pusher_http", "mqtt_publish", "subscribe", "subscription", "spool", "start", "cluster", "mqtt_session_takeover",
        "state", "reload", "pusher_sign_in", "dead_letters", "homeassistant",
    ]

    /// Creates every series `bridge` can count, at zero, so that each labelled family is in the
    /// first scrape and `increase()`/alerts see the first event (docs/contract.md §5.7): both
    /// sides' connection and reconnect series, both buffers, every error kind, and for each rule
    /// the outcomes it can have (`filtered` with `where`, `coalesced` with `throttle`,
    /// `unchanged` with `on_change`), plus the per-bridge `unmatched` and `suppressed` series.
    /// Called when a bridge's runtime is made (its gauges start at zero: nothing is connected yet)
    /// and after a rules-only reload with `keepingReadings` (new rules get their series; the gauges
    /// of the running bridge keep what they read — a reload must not show a live connection as
    /// down; issue 26).
    public func registerZeroSeries(for bridge: BridgeSettings, keepingReadings: Bool = false) {
        let name = bridge.name
        func zero(_ gauge: CoreMetrics.Gauge) {
            if !keepingReadings { gauge.record(0) }
        }
        for side in [Side.pusher, .mqtt] {
            _ = reconnects(bridge: name, side: side)
            zero(connectionUp(bridge: name, side: side))
        }
        for direction in [Direction.pusherToMQTT, .mqttToPusher] {
            zero(buffered(bridge: name, direction: direction))
            zero(spoolDegraded(bridge: name, direction: direction))
            _ = received(bridge: name, direction: direction)
            _ = messages(bridge: name, rule: "", direction: direction, outcome: .unmatched)
        }
        _ = messages(bridge: name, rule: "", direction: .mqttToPusher, outcome: .suppressed)
        for kind in Self.errorKinds { _ = errors(bridge: name, kind: kind) }
        // The dead-letter store (docs/contract.md §8.3); its gauge is set when the store opens.
        _ = deadLettersStored(bridge: name)
        _ = deadLettersEvicted(bridge: name)
        _ = deadLettersDamaged(bridge: name)
        for outcome in Self.redriveOutcomes { _ = deadLettersRedriven(bridge: name, outcome: outcome) }
        // Gap records (any number of connections: a reconnect leaves a gap) and the merge's duplicates.
        _ = pusherGaps(bridge: name)
        _ = pusherGapSeconds(bridge: name)
        for outcome in [Outcome.delivered, .dropped] {
            _ = messages(bridge: name, rule: "gaps", direction: .pusherToMQTT, outcome: outcome)
        }
        if bridge.pusher.connections > 1 {
            _ = messages(bridge: name, rule: "", direction: .pusherToMQTT, outcome: .duplicate)
            _ = messages(bridge: name, rule: "", direction: .pusherToMQTT, outcome: .suppressed)
            for connection in 0..<bridge.pusher.connections { zero(pusherConnectionUp(bridge: name, connection: connection)) }
        }
        func rule(_ rule: String, _ direction: Direction, _ conditions: PayloadConditions, extra: [Outcome] = []) {
            var outcomes: [Outcome] = [.delivered, .deadLettered, .dropped] + extra
            if conditions.condition != nil { outcomes.append(.filtered) }
            if conditions.throttle != nil { outcomes.append(.coalesced) }
            if conditions.onChange { outcomes.append(.unchanged) }
            for outcome in outcomes { _ = messages(bridge: name, rule: rule, direction: direction, outcome: outcome) }
            if conditions.shapesRate {
                _ = throttleTargetsFull(bridge: name, rule: rule)
                zero(throttleTargets(bridge: name, rule: rule))
            }
        }
        let partitioned = bridge.cluster?.mqttToPusher == .partition
        for mqttRule in bridge.mqttToPusherRules {
            rule(mqttRule.name, .mqttToPusher, mqttRule.conditions, extra: partitioned ? [.suppressed, .elsewhere] : [.suppressed])
        }
        for pusherRule in bridge.pusherToMQTTRules { rule(pusherRule.name, .pusherToMQTT, pusherRule.conditions) }
        if !bridge.presence.isEmpty {
            rule(BridgeStateMachine<ContinuousClock.Instant>.presenceRule, .pusherToMQTT, .none)
        }
        for discovery in bridge.discoveryRules {
            _ = discoveredChannels(bridge: name, rule: discovery.name)
            _ = discoverySkipped(bridge: name, rule: discovery.name)
        }
        if bridge.cluster != nil {
            zero(clusterMembers(bridge: name))
            zero(clusterChannelsHeld(bridge: name))
            _ = clusterTakeovers(bridge: name)
            for confirmed in [true, false] { _ = clusterHandovers(bridge: name, confirmed: confirmed) }
        }
        if bridge.users != nil {
            zero(watchlistOnline(bridge: name))
            rule(UsersMirror.rule, .pusherToMQTT, .none)
        }
        if bridge.webhooks != nil {
            rule(WebhookTranslator.ruleName, .pusherToMQTT, .none)
            for outcome in WebhookOutcome.allCases { _ = webhooks(bridge: name, outcome: outcome) }
        }
    }

    /// Records one end-to-end delivery time into `pusher_mqtt_bridge_delivery_seconds`.
    public func recordDelivery(_ duration: Duration) {
        deliveryTimer.recordNanoseconds(
            Int64(duration.components.seconds) * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// The Prometheus text exposition of every metric: the registry's, then `messages_total`.
    public func render() -> [UInt8] {
        var buffer = registry.emitToBuffer()
        let series = caches.withLock { $0.messageFamily.series }
        MessageCounterFamily.render(series, into: &buffer)
        return buffer
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Counter {
        let key = Self.key(label, dimensions)
        return caches.withLock { caches in
            if let existing = caches.counters[key] { return existing }
            let made = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            caches.counters[key] = made
            return made
        }
    }

    private func gauge(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Gauge {
        let key = Self.key(label, dimensions)
        return caches.withLock { caches in
            if let existing = caches.gauges[key] { return existing }
            let made = CoreMetrics.Gauge(label: label, dimensions: dimensions, factory: factory)
            caches.gauges[key] = made
            return made
        }
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        var key = label
        for (name, value) in dimensions {
            key += "\u{1F}" + name + "=" + value
        }
        return key
    }
}
