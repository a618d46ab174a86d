import BridgeVocabulary

extension BridgeStateMachine {
    /// The Pusher connection changed state (`state` is the client's name for it).
    ///
    /// Going down from connected tells every presence mirror: the member lists are stale until
    /// the next `subscription_succeeded` replaces them.
    public mutating func pusherConnectionChanged(to state: String, connected: Bool, wasConnected: Bool, receivedAtMillis: Int64) -> [Action]
    {
        connectivity.pusherState = state
        connectivity.pusherConnected = connected
        var actions: [Action] = []
        if connected {
            connectivity.pusherProblem = nil
            connectionFailureLog.connected(.pusher)
            actions.append(.connectionChanged(.pusher, up: true, reconnected: pusherConnectedOnce))
            pusherConnectedOnce = true
        } else {
            actions.append(.connectionChanged(.pusher, up: false, reconnected: false))
            if wasConnected {
                forEachMirror(receivedAtMillis: receivedAtMillis, into: &actions) { $0.pusherDisconnected() }
            }
        }
        return actions
    }

    /// The MQTT connection changed state (`state` is the client's name for it).
    ///
    /// On every connect: look for redeliveries (the broker resends what was not acknowledged
    /// first), publish the retained `online` status (the Last Will says `offline`), and let the
    /// presence mirrors publish what they hold.
    public mutating func mqttConnectionChanged(to state: String, connected: Bool, now: Instant, receivedAtMillis: Int64) -> [Action] {
        connectivity.mqttState = state
        connectivity.mqttConnected = connected
        guard connected else { return [.connectionChanged(.mqtt, up: false, reconnected: false)] }
        connectivity.mqttProblem = nil
        connectionFailureLog.connected(.mqtt)
        var actions: [Action] = [.connectionChanged(.mqtt, up: true, reconnected: mqttConnectedOnce)]
        mqttConnectedOnce = true
        inbound.connected(now: now)
        actions.append(.publishStatus(topic: settings.effectiveStatusTopic, payload: "online"))
        forEachMirror(receivedAtMillis: receivedAtMillis, into: &actions) { $0.mqttConnected() }
        return actions
    }

    /// `side` could not connect, or lost its connection, for `reason` (a ``ConnectionFailureReason``):
    /// `/readyz` shows it until the side connects; whether to log this one is returned
    /// (``ConnectionFailureLog``: the first, a new reason, else once a minute).
    public mutating func connectionFailed(_ side: BridgeSide, reason: String, now: Instant) -> ConnectionFailureLog<Instant>.Decision {
        switch side {
        case .pusher: connectivity.pusherProblem = reason
        case .mqtt: connectivity.mqttProblem = reason
        }
        return connectionFailureLog.failed(side, reason: reason, now: now)
    }
}
