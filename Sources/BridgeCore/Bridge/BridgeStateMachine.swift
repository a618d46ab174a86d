import BridgeVocabulary
import MQTTVocabulary
import PusherProtocol

/// The decisions of one bridge at work, with no I/O, no clock reads, no logging and no tasks.
///
/// The daemon's runtime (Sources/BridgeDaemon/Runtime) owns the connections, the outboxes and
/// the metrics; it tells this machine what happened — an event from Pusher, a message from the
/// broker, a connection coming up or going down, a reload, a stop — and carries out the
/// ``Action``s it returns, in order, deciding nothing itself.
///
/// What it decides:
/// - where every message goes: the ``RuleTable`` (per message), the ``PresenceMirror``s
///   (presence → retained), dead letters to the dead-letter topic;
/// - which MQTT messages are echoes of our own publishes or redeliveries (``InboundMQTTFilter``);
/// - what a connection change means: reconnect counts, presence mirrors refreshed, the retained
///   `online` status, readiness (``BridgeConnectivity``);
/// - which of a flood of dead-letter and drop log lines to write (``RateLimitedLog``);
/// - what a reload of the rules subscribes and unsubscribes;
/// - that nothing new is taken from Pusher once the bridge stops.
///
/// Hot paths append to an `inout [Action]` the caller reuses, so that a message costs no array
/// allocation of its own. Time is data: `now` for windows and limits, `receivedAt` (wall clock)
/// for delivery latency and templates.
public struct BridgeStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// A command for the runtime.
    public enum Action: Sendable, Equatable {
        /// Append this publish to the Pusher → MQTT outbox (events, presence, dead letters).
        case enqueueToMQTT(MQTTPublish, receivedAtMillis: Int64)
        /// Append this event to the MQTT → Pusher outbox.
        case enqueueToPusher(PusherEventPublish, receivedAtMillis: Int64)
        /// Add `by` to `messages_total{rule,direction,outcome}`.
        case count(rule: String, direction: MessageDirection, outcome: MessageOutcome, by: Int)
        /// Add `by` to `received_total{direction}`: messages that came in, once per rule that took
        /// each (once when none did), so that received = the outcomes + buffered at every scrape
        /// (docs/contract.md §7.6).
        case received(MessageDirection, by: Int)
        /// Log this dead letter; `suppressedLogs` similar lines were left out since the last one.
        case logDeadLetter(DeadLetter, suppressedLogs: Int)
        /// Keep this dead letter in the bridge's store (docs/contract.md §8.3), every one, unlike the log line.
        case keepDeadLetter(DeadLetter, direction: MessageDirection)
        /// Log that the buffer dropped messages; `suppressedLogs` lines were left out since the last one.
        case logDropped(rule: String, direction: MessageDirection, dropped: Int, suppressedLogs: Int)
        /// A side went up or down: set its gauge, count a reconnect when `reconnected`.
        case connectionChanged(BridgeSide, up: Bool, reconnected: Bool)
        /// Publish this retained status (`online`) outside the outbox: it is state, not data.
        case publishStatus(topic: String, payload: String)
        /// Subscribe this Pusher channel.
        case subscribeChannel(String)
        /// Leave this Pusher channel.
        case unsubscribeChannel(String)
        /// Subscribe this MQTT filter (No Local and Retain Handling already fitted to the protocol version).
        case subscribeTopicFilter(MQTTSubscription)
        /// Unsubscribe this MQTT filter.
        case unsubscribeTopicFilter(String)
        /// A `throttle` began holding a message: the release timer must wake by
        /// ``nextShapingDeadline``.
        case shapingHeld
        /// A rule's `max_targets` was reached: a message of a new target went out unshaped (counted).
        case shapingTargetsFull(rule: String, direction: MessageDirection)
    }

    /// The bridge's settings (the rules part changes on reload; the rest restarts the bridge).
    public private(set) var settings: BridgeSettings
    /// The routing table built from ``settings``.
    public private(set) var rules: RuleTable
    /// Both connections as operators see them.
    public internal(set) var connectivity = BridgeConnectivity()
    /// Whether ``stopRequested()`` was called: nothing new is taken from Pusher.
    public private(set) var isStopping = false

    var mirrors: [String: PresenceMirror] = [:]
    var rooms = DiscoveredRooms()
    var shaping: RuleShaping<Instant>
    var inbound: InboundMQTTFilter<Instant>
    var pusherConnectedOnce = false
    var mqttConnectedOnce = false
    var deadLetterLog = RateLimitedLog<Instant>(perMinute: 20)
    var dropLog = RateLimitedLog<Instant>(perMinute: 20)
    var connectionFailureLog = ConnectionFailureLog<Instant>()
    private var lastHeartbeat: Instant?

    /// The rule name presence-mirror publishes are counted under.
    public static var presenceRule: String { "presence" }

    /// A bridge about to start with `settings`.
    public init(settings: BridgeSettings) {
        self.settings = settings
        rules = RuleTable(bridge: settings)
        shaping = RuleShaping(settings: settings)
        inbound = InboundMQTTFilter(guardsAgainstEchoes: settings.guardsAgainstEchoesByDigest)
        for rule in settings.presence where rule.discovery == nil {
            mirrors[rule.channel] = PresenceMirror(rule: rule, ownUserID: settings.ownPresenceUserID)
        }
    }

    // MARK: Start, reload, stop

    /// The bridge starts: subscribe every channel and MQTT filter the settings name (in a
    /// cluster, rule filters as shared subscriptions and the membership filter:
    /// ``BridgeSettings/effectiveMQTTSubscriptions``).
    public func started() -> [Action] {
        settings.pusherChannels.map { .subscribeChannel($0) }
            + settings.effectiveMQTTSubscriptions.map { .subscribeTopicFilter(wire($0.subscription)) }
    }

    /// A reload changed only rules or presence mirrors: swap them in, keeping the connections.
    /// Mirrors whose rule is unchanged keep their members; removed mirrors clear what they
    /// published; channels and filters no longer needed are left, new ones subscribed.
    /// Messages held by a rule whose `throttle`/`on_change` changed or went away are released at
    /// once (`now`); shapers of unchanged rules keep what they hold.
    public mutating func rulesReplaced(by new: BridgeSettings, receivedAtMillis: Int64, now: Instant) -> [Action] {
        var actions: [Action] = []
        var retired = shaping.replace(with: RuleShaping(settings: new))
        release(&retired, now: now.advanced(by: .seconds(86_400 * 365)), into: &actions)
        var kept = takeKeptRooms(for: new)
        for rule in new.presence where rule.discovery == nil {
            if let existing = mirrors.removeValue(forKey: rule.channel), existing.rule == rule {
                kept[rule.channel] = existing
            } else {
                kept[rule.channel] = PresenceMirror(rule: rule, ownUserID: new.ownPresenceUserID)
            }
        }
        for channel in mirrors.keys.sorted() {
            perform(mirrors[channel]!.retire(), receivedAtMillis: receivedAtMillis, into: &actions)
        }
        mirrors = kept
        let oldChannels = settings.pusherChannels
        let oldSubscriptions = settings.effectiveMQTTSubscriptions
        settings = new
        rules = RuleTable(bridge: new)

        let newChannels = Set(new.pusherChannels)
        for channel in oldChannels where !newChannels.contains(channel) { actions.append(.unsubscribeChannel(channel)) }
        let newFilters = Set(new.effectiveMQTTSubscriptions.map(\.filter))
        for subscription in oldSubscriptions where !newFilters.contains(subscription.filter) {
            actions.append(.unsubscribeTopicFilter(subscription.filter))
        }
        let known = Set(oldChannels)
        for channel in new.pusherChannels where !known.contains(channel) { actions.append(.subscribeChannel(channel)) }
        // Subscribing again is harmless at the broker and picks up a changed QoS or option.
        for needed in new.effectiveMQTTSubscriptions { actions.append(.subscribeTopicFilter(wire(needed.subscription))) }
        return actions
    }

    /// The bridge was told to stop. Returns false when it already was (stop is idempotent).
    public mutating func stopRequested() -> Bool {
        defer { isStopping = true }
        return !isStopping
    }

    /// The runtime's housekeeping ran at `now` (the systemd watchdog's liveness signal).
    public mutating func heartbeat(now: Instant) { lastHeartbeat = now }

    /// Whether the housekeeping ran within `interval` before `now`.
    public func isResponsive(now: Instant, within interval: Duration) -> Bool {
        guard let lastHeartbeat else { return true }
        return lastHeartbeat.duration(to: now) <= interval
    }

    /// The subscription as sent to the broker: No Local and Retain Handling exist in MQTT 5 only.
    private func wire(_ subscription: MQTTSubscription) -> MQTTSubscription {
        let v5 = settings.mqtt.protocolVersion == .v5
        var wire = subscription
        wire.noLocal = v5 && subscription.noLocal
        wire.retainAsPublished = v5 && subscription.retainAsPublished
        wire.retainHandling = v5 ? subscription.retainHandling : .sendAlways
        return wire
    }
}
