/// Home Assistant discovery for one bridge (docs/contract.md §8.3), as a pure machine
/// (docs/style.md §1, §2): what to subscribe, publish and remove, and when the next state is due.
///
/// Inputs are named for what happened (the MQTT connection came or went, a message arrived on
/// `<prefix>/status`, a connection of the bridge changed, a reload changed the settings); the
/// owner takes the resulting actions with ``take(now:reading:)``, in order, and carries them out
/// one after the other, sleeping until ``nextDeadline`` or the next input.
///
/// - Configs (retained) go out at every MQTT connect, and again whenever Home Assistant's birth
///   message `online` arrives on `<prefix>/status`.
/// - The state (retained) goes out at every connect, every ``interval``, and at once when a
///   connection of the bridge changes.
/// - A reload that turns discovery off removes every config (an empty retained message) and
///   unsubscribes; one that changes the prefix removes the old configs and publishes the new.
public struct HomeAssistantPublisher<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What the owner carries out, in order.
    public enum Action: Sendable, Equatable {
        /// Subscribe to Home Assistant's birth topic (`<prefix>/status`, QoS 1).
        case subscribe(filter: String)
        /// Stop listening to a birth topic no longer in use.
        case unsubscribe(filter: String)
        /// Publish, retained, QoS 1: a config, a removal or the state.
        case publish(HomeAssistantMessage)
    }

    /// How often the state is published while nothing changes.
    public static var interval: Duration { .seconds(10) }

    public private(set) var settings: HomeAssistantSettings
    /// The device under the current prefix (also while off: its topics are what a switch-off removes).
    public private(set) var device: HomeAssistantDevice
    private let bridge: BridgeSettings
    private let version: String
    private var connected = false
    private var pending: [Action] = []
    /// When the state is next due; nil while off or disconnected.
    private var stateDue: Instant?
    private var previous: (reading: HomeAssistantReading, at: Instant)?

    public init(bridge: BridgeSettings, settings: HomeAssistantSettings, version: String = BridgeCoreVersion.current) {
        self.bridge = bridge
        self.settings = settings
        self.version = version
        device = HomeAssistantDevice(bridge: bridge, prefix: settings.prefix, version: version)
    }

    /// The time ``take(now:reading:)`` should next be called without another input, if any.
    public var nextDeadline: Instant? { stateDue }

    /// Whether actions wait to be taken at once.
    public var hasPending: Bool { !pending.isEmpty }

    /// The bridge's MQTT connection is up (again): subscribe, announce, and publish the state now.
    public mutating func mqttConnected(now: Instant) {
        connected = true
        guard settings.enabled else { return }
        announce(now: now)
    }

    /// The MQTT connection is down: nothing is published until it is back (then everything is).
    public mutating func mqttDisconnected() {
        connected = false
        stateDue = nil
        pending.removeAll()
    }

    /// Whether a message on `topic` is Home Assistant's birth or will for this bridge, which the
    /// bridge's rules never see.
    public func isBirthTopic(_ topic: String) -> Bool {
        settings.enabled && topic == settings.birthTopic
    }

    /// A message on ``isBirthTopic(_:)``: `online` (Home Assistant started) republishes every
    /// config and the state; anything else (its `offline` will) is ignored. The payload is
    /// compared byte for byte, not parsed.
    public mutating func birthMessageReceived(payload: some Collection<UInt8>, now: Instant) {
        guard settings.enabled, connected, payload.elementsEqual("online".utf8) else { return }
        pending += device.configs.map(Action.publish)
        stateDue = now
    }

    /// A connection of the bridge (MQTT or Pusher) changed: the state goes out at once.
    public mutating func connectionChanged(now: Instant) {
        guard settings.enabled, connected else { return }
        stateDue = now
    }

    /// The cluster's members or this member's channels changed: the state goes out at once.
    public mutating func clusterChanged(now: Instant) {
        connectionChanged(now: now)
    }

    /// A reload changed `[daemon] homeassistant` or `homeassistant_prefix` (no restart).
    public mutating func settingsChanged(to new: HomeAssistantSettings, now: Instant) {
        guard new != settings else { return }
        let old = settings
        let oldDevice = device
        settings = new
        device = HomeAssistantDevice(bridge: bridge, prefix: new.prefix, version: version)
        guard connected else { return }
        if old.enabled {
            pending += oldDevice.removals.map(Action.publish)
            if !new.enabled || old.birthTopic != new.birthTopic { pending.append(.unsubscribe(filter: old.birthTopic)) }
        }
        if new.enabled {
            announce(now: now, subscribe: !old.enabled || old.birthTopic != new.birthTopic)
        } else {
            stateDue = nil
        }
    }

    /// The actions due at `now`: those waiting, then the state if due (its rates computed from the
    /// previous state's reading).
    public mutating func take(now: Instant, reading: HomeAssistantReading) -> [Action] {
        var actions = pending
        pending.removeAll()
        if settings.enabled, connected, let due = stateDue, due <= now {
            let elapsed = previous.map { $0.at.duration(to: now) } ?? .zero
            let state = HomeAssistantState(reading: reading, previous: previous?.reading, elapsed: elapsed)
            actions.append(.publish(HomeAssistantMessage(topic: device.stateTopic, payload: state.json)))
            previous = (reading, now)
            stateDue = now.advanced(by: Self.interval)
        }
        return actions
    }

    private mutating func announce(now: Instant, subscribe: Bool = true) {
        if subscribe { pending.append(.subscribe(filter: settings.birthTopic)) }
        pending += device.configs.map(Action.publish)
        stateDue = now
    }
}
