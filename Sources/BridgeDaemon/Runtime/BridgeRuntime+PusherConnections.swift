import BridgeCore
import Logging
import PusherChannels

/// The bridge's N Pusher connections (`[bridge.pusher] connections`, docs/pusher-merge.md): every
/// channel on each, their reports through ``PusherConnectionSet`` (under the supervisor's lock)
/// so that the bridge machine sees one Pusher side, and the gap records.
extension BridgeRuntime {
    /// Subscribes `channel` on every connection (each takes it at any time and sends it once connected).
    func subscribeEverywhere(_ channel: String) {
        pusherSlots.forEachClient { _ = $0.subscribe(channel) }
    }

    /// Leaves `channel` on every connection: on purpose, so no gap is reported for it.
    func unsubscribeEverywhere(_ channel: String) {
        pusherSlots.forEachClient { $0.unsubscribe(channel) }
        // Held events this releases go out with the channel's next event or housekeeping's next
        // round (the caller may be a consumer already holding `pusherInbound`).
        decisions.withLock { $0.pusherConnections.channelLeft(channel) }
    }

    /// Held events the merge released outside an event (a connection down, a hold's end, a channel
    /// left) go on to the bridge machine, in order. The caller holds ``pusherInbound`` (a
    /// consumer, or housekeeping).
    func routeReleasedEvents() {
        guard pusherSlots.count > 1 else { return }
        let now = Self.supervisorNow
        var counted: [SupervisorAction] = []
        var actions: [Action] = []
        decisions.withLock { state in
            let released = state.pusherConnections.takeReleasedEvents()
            Self.route(released, in: &state, now: now, counted: &counted, into: &actions)
        }
        executeBatched(actions)
        if !counted.isEmpty { execute(counted) }
    }

    /// Housekeeping's look at the merge: old entries of quiet channels leave, join holds that are
    /// due end (their events go on).
    func expirePusherMerge() {
        guard pusherSlots.count > 1 else { return }
        pusherInbound.withLock { _ in
            let now = Self.coverageNow
            decisions.withLock { $0.pusherConnections.expire(now: now) }
            routeReleasedEvents()
        }
    }

    /// The connection whose `socket_id` the bridge's HTTP publishes exclude: the first connected one.
    var pusherSocket: (connection: Int, socketID: String)? {
        for (connection, pusher) in pushers.enumerated() {
            if let socketID = pusher.socketID { return (connection, socketID) }
        }
        return nil
    }

    /// Sends a client event on the first connected connection (client events go out once, on one
    /// connection); with more than one, it is recorded as the bridge's own first, so that the other
    /// connections' copies are echoes. With none connected, the first client's refusal is thrown.
    func triggerClientEvent(channel: String, event: String, data: String) throws(PusherError) {
        guard pusherSlots.count > 1 else { return try pushers[0].trigger(channel: channel, event: event, data: data) }
        for (connection, pusher) in pushers.enumerated() where pusher.socketID != nil {
            let now = Self.coverageNow
            let key = PusherEventKey(name: event, data: data, userID: nil)
            decisions.withLock { $0.pusherConnections.ownEvent(channel: channel, key: key, sentOn: connection, now: now) }
            do throws(PusherError) {
                try pusher.trigger(channel: channel, event: event, data: data)
                return
            } catch {
                continue  // it went down meanwhile: the next one (its record expires unmatched, counted against nobody)
            }
        }
        try pushers[0].trigger(channel: channel, event: event, data: data)
    }

    /// The time for the connection set: the monotonic clock for gap lengths, the wall clock for their dates.
    static var coverageNow: PusherConnectionSet.Now { PusherConnectionSet.Now(.now, wall: .now()) }

    /// Connection `connection` changed state: the Pusher side's change, if any, goes to the supervisor.
    func pusherConnectionChanged(_ change: PusherConnectionStateChange, connection: Int) {
        let connected = change.current == .connected
        let now = Self.coverageNow
        let receivedAt = now.wall.millisecondsSince1970
        var actions: [Action] = []
        let (effects, wake) = decisions.withLock { state in
            let effects = state.pusherConnections.connectionChanged(
                connection, to: change.current.rawValue, connected: connected, socketID: change.socketID, now: now)
            Self.applyPresence(effects.presence, to: &state.supervisor.bridge, receivedAtMillis: receivedAt, into: &actions)
            return (effects, state.coverageWaiters.resumeAll(returning: ()))
        }
        wake.resume()
        execute(actions)
        if pusherSlots.count > 1 {
            metrics.pusherConnectionUp(bridge: name, connection: connection).record(connected ? 1 : 0)
            routeReleasedEvents()
        }
        if let side = effects.side {
            perform {
                $0.pusherConnectionChanged(
                    to: side.state, connected: side.connected, wasConnected: side.wasConnected, socketID: side.socketID, $1)
            }
        }
        if connected {
            logger.info("pusher connected", metadata: ["pusher.socket_id": "\(change.socketID ?? "")"].merging(tag(connection)) { $1 })
        } else {
            logger.info("pusher \(change.current.rawValue)", metadata: tag(connection))
        }
    }

    /// Connection `connection`'s subscription to `channel` succeeded: the supervisor hears of the
    /// first holder's; a gap it ends is published.
    func pusherSubscribed(_ channel: String, connection: Int) {
        let now = Self.coverageNow
        let (first, gap, wake) = decisions.withLock { state in
            let (first, gap) = state.pusherConnections.subscribed(channel, connection: connection, now: now)
            return (first, gap, state.coverageWaiters.resumeAll(returning: ()))
        }
        // Logged before the waiters go on (a replacement logs "pusher connection replaced" next).
        logger.debug("subscribed", metadata: ["pusher.channel": "\(channel)"].merging(tag(connection)) { $1 })
        wake.resume()
        if first { perform { $0.pusherSubscriptionSucceeded(channel, $1) } }
        if let gap { publishGap(gap) }
    }

    /// Connection `connection`'s subscription to `channel` was refused: the supervisor hears of it
    /// when no other connection holds the channel.
    func pusherSubscriptionFailed(_ channel: String, connection: Int, error: PusherError) {
        let now = Self.coverageNow
        let forward = decisions.withLock { $0.pusherConnections.subscriptionFailed(channel, connection: connection, now: now) }
        routeReleasedEvents()
        if forward { perform { $0.pusherSubscriptionFailed(channel, $1) } }
        metrics.errors(bridge: name, kind: "subscription").increment()
        logger.error(
            "subscription failed", metadata: ["pusher.channel": "\(channel)", "error": "\(error)"].merging(tag(connection)) { $1 })
    }

    /// A presence change from connection `connection`, consolidated over the connections, to the mirrors.
    func pusherPresenceChanged(_ change: PusherPresenceChange, connection: Int) {
        let receivedAt = UTCTimestamp.now().millisecondsSince1970
        var actions: [Action] = []
        decisions.withLock { state in
            let changes: [PresenceConsolidation.Change]
            switch change {
            case .subscriptionSucceeded(let channel, let members, _):
                let list = members.map { PresenceMember(userID: $0.userID, infoJSON: $0.userInfo) }
                changes = state.pusherConnections.presenceSubscribed(channel, connection: connection, members: list)
            case .memberAdded(let channel, let member):
                let added = PresenceMember(userID: member.userID, infoJSON: member.userInfo)
                changes = state.pusherConnections.presenceAdded(channel, connection: connection, member: added)
            case .memberRemoved(let channel, let member):
                changes = state.pusherConnections.presenceRemoved(channel, connection: connection, userID: member.userID)
            }
            Self.applyPresence(changes, to: &state.supervisor.bridge, receivedAtMillis: receivedAt, into: &actions)
        }
        execute(actions)
    }

    private static func applyPresence(
        _ changes: [PresenceConsolidation.Change], to machine: inout BridgeStateMachine<ContinuousClock.Instant>,
        receivedAtMillis: Int64, into actions: inout [Action]
    ) {
        for change in changes {
            switch change {
            case .subscribed(let channel, let members):
                machine.presenceSubscribed(channel: channel, members: members, receivedAtMillis: receivedAtMillis, into: &actions)
            case .added(let channel, let member):
                machine.presenceMemberAdded(channel: channel, member: member, receivedAtMillis: receivedAtMillis, into: &actions)
            case .removed(let channel, let userID):
                machine.presenceMemberRemoved(channel: channel, userID: userID, receivedAtMillis: receivedAtMillis, into: &actions)
            }
        }
    }

    /// The rule label of gap records in `messages_total` (they are Pusher → MQTT arrivals).
    static let gapRule = "gaps"

    /// Publishes a gap record to `<status_topic>/gaps` (QoS 1, not retained) through the outbox, so
    /// that it waits for the broker like any message, and counts it.
    func publishGap(_ gap: PusherGap) {
        metrics.pusherGaps(bridge: name).increment()
        metrics.pusherGapSeconds(bridge: name).increment(by: gap.seconds)
        logger.warning(
            "pusher gap: events on the channel in this window were not received",
            metadata: [
                "pusher.channel": "\(gap.channel)", "from": "\(gap.from.rfc3339)", "to": "\(gap.to.rfc3339)", "seconds": "\(gap.seconds)",
            ])
        let publish = MQTTPublish(
            rule: Self.gapRule, topic: connection.effectiveStatusTopic + "/gaps", payload: Array(gap.json.utf8), qos: 1,
            retain: false)
        execute([.received(.pusherToMQTT, by: 1), .enqueueToMQTT(publish, receivedAtMillis: gap.to.millisecondsSince1970)])
    }

    /// Writes when each channel was last held to the state directory; returns the error text (counted).
    func writeLastHeld() -> String? {
        guard let lastHeldFile else { return nil }
        let now = Self.coverageNow
        let times = decisions.withLock { $0.pusherConnections.coverage.lastHeld(now: now) }
        let problem = lastHeldFile.write(times)
        if problem != nil { metrics.errors(bridge: name, kind: "state").increment() }
        return problem
    }

    /// With more than one connection, each one's state for STATUS= and `/readyz`:
    /// `0 connected, 1 connecting` (nil with one).
    var pusherConnectionsSummary: String? {
        guard pusherSlots.count > 1 else { return nil }
        let states = decisions.withLock { $0.pusherConnections.states }
        return states.enumerated().map { "\($0.offset) \($0.element)" }.joined(separator: ", ")
    }

    /// The `pusher.connection` log field, with more than one connection.
    func tag(_ connection: Int) -> Logger.Metadata {
        pusherSlots.count > 1 ? ["pusher.connection": "\(connection)"] : [:]
    }
}
