/// What a reload changes, bridge by bridge (docs/contract.md §3: apply only the difference): the
/// ``ConfigDiff``, with changed bridges split by whether their connections can stay.
public struct ReloadPlan: Sendable {
    /// Same settings: untouched, connections kept.
    public var unchanged: [String]
    /// Only rules, presence mirrors or `[bridge.webhooks]` changed: swapped in place, connections
    /// kept — also when the rules move the MQTT → Pusher overflow default (no `overflow` key, and
    /// the rules now read a different QoS class; docs/contract.md §7.6): the buffer takes the new
    /// policy in place.
    public var rulesChanged: [BridgeSettings] = []
    /// `[bridge.pusher]` changed, but not `connections`, `api_lanes` or `drain_rate` (and perhaps the rules): the
    /// Pusher connections are replaced in place, one at a time, and the MQTT connection is kept
    /// (docs/contract.md §8.1, "staggered reconnects").
    public var pusherReplaced: [BridgeSettings] = []
    /// MQTT, reconnect, buffer, cluster, `max_dead_letters` or `[bridge.users]` settings changed, or the Pusher
    /// connection count or HTTP lanes: the bridge restarts.
    public var restarted: [BridgeSettings] = []
    /// New bridges, started.
    public var added: [BridgeSettings]
    /// Bridges no longer in the file, stopped.
    public var removed: [String]
    /// `[daemon]` changed (other than Home Assistant discovery): it takes effect at the next restart only.
    public var daemonChanged: Bool
    /// `[daemon] homeassistant` or `homeassistant_prefix` changed: the new settings, applied in place
    /// by every running bridge (configs published or removed; docs/contract.md §8.3); nil when unchanged.
    public var homeAssistant: HomeAssistantSettings?
    /// With discovery on before the reload: the running bridges whose Home Assistant device leaves
    /// (its configs removed before the bridge stops) — bridges removed, and bridges restarted as
    /// another device (a cluster member under another `instance`).
    public var homeAssistantDevicesLeaving: [String] = []

    /// The plan to go from `old` to `new`.
    public init(old: BridgeConfiguration, new: BridgeConfiguration) {
        let diff = ConfigDiff(from: old, to: new)
        unchanged = diff.unchanged
        removed = diff.removed
        var oldDaemon = old.daemon
        oldDaemon.homeAssistant = new.daemon.homeAssistant
        daemonChanged = oldDaemon != new.daemon
        homeAssistant = old.daemon.homeAssistant == new.daemon.homeAssistant ? nil : new.daemon.homeAssistant
        added = diff.added.compactMap { new.bridge(named: $0) }
        for name in diff.changed {
            guard let previous = old.bridge(named: name), let settings = new.bridge(named: name) else { continue }
            let sameElsewhere =
                previous.mqtt == settings.mqtt && previous.reconnect == settings.reconnect && previous.buffer == settings.buffer
                && previous.cluster == settings.cluster && previous.users == settings.users
                && previous.maxDeadLetters == settings.maxDeadLetters
            if sameElsewhere, previous.pusher == settings.pusher {
                rulesChanged.append(settings)
            } else if sameElsewhere, previous.pusher.connections == settings.pusher.connections,
                previous.pusher.apiLanes == settings.pusher.apiLanes, previous.pusher.drainRate == settings.pusher.drainRate
            {
                pusherReplaced.append(settings)
            } else {
                restarted.append(settings)
            }
        }
        if old.daemon.homeAssistant.enabled {
            let prefix = old.daemon.homeAssistant.prefix
            homeAssistantDevicesLeaving =
                removed
                + restarted.compactMap { settings in
                    guard let previous = old.bridge(named: settings.name) else { return nil }
                    let before = HomeAssistantDevice(bridge: previous, prefix: prefix).nodeID
                    return before == HomeAssistantDevice(bridge: settings, prefix: prefix).nodeID ? nil : settings.name
                }
        }
    }
}
