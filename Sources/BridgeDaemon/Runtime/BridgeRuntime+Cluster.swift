import BridgeCore
import Logging
import MQTTVocabulary
import MosquittoClient
import PusherChannels

/// A cluster at work (docs/contract.md §7.4): the broker's membership messages, the MQTT and
/// Pusher events and the clock fed to the bridge's ``ClusterMembership``, and its actions carried
/// out — membership publishes, Pusher subscriptions, `offline` for dead members, the handover on stop.
extension BridgeRuntime {
    /// Runs the membership clock and the membership publisher until the bridge stops.
    func runCluster() async {
        guard let cluster else { return }
        await withDiscardingTaskGroup { group in
            group.addTask { await self.runClusterPublisher(cluster) }
            while !Task.isCancelled {
                let now = ContinuousClock.now
                let deadline = cluster.view.withLock { $0.membership.nextDeadline }
                if let deadline, deadline <= now {
                    performCluster { $0.membership.tick(now: now) }
                    continue
                }
                if cluster.view.withLock({ $0.wantedChanged }) { clusterWantedChanged() }
                let heldDue = cluster.view.withLock { view -> ContinuousClock.Instant? in
                    guard let report = view.pendingHeld, let due = view.pendingHeldDue else { return nil }
                    guard due <= now else { return due }
                    view.pendingHeld = nil
                    view.pendingHeldDue = nil
                    cluster.outgoing.continuation.yield(.message(cluster.message(for: report)))
                    return nil
                }
                // At least every 100 ms: the machine notices a frozen process by the gap between ticks,
                // and a held report queued meanwhile waits at most that long.
                let wake = [deadline, heldDue, now + .milliseconds(100)].compactMap { $0 }.min()!
                do { try await Task.sleep(until: wake, tolerance: .milliseconds(5)) } catch { break }
            }
            cluster.outgoing.continuation.finish()
        }
    }

    /// Publishes membership messages in order. A publish that fails (no connection) is dropped:
    /// the machine publishes its record and heartbeat again after the next connect.
    private func runClusterPublisher(_ cluster: BridgeCluster) async {
        for await item in cluster.outgoing.stream {
            switch item {
            case .message(let message):
                do { try await mqtt.publish(message) } catch {
                    logger.debug("cluster message not published", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
                }
            case .barrier(let continuation):
                continuation.resume()
            }
        }
    }

    // MARK: Events

    /// The MQTT connection came up or went down. On every connect the membership filter is
    /// subscribed again, so the broker sends the retained records even when it kept the session.
    func clusterMQTTConnectionChanged(connected: Bool) {
        guard let cluster else { return }
        let now = ContinuousClock.now
        if connected {
            let filter = MQTTSubscription(cluster.settings.membershipFilter, qos: .atLeastOnce, noLocal: false, retainHandling: .sendAlways)
            commands.continuation.yield(.subscribeTopicFilter(filter))
            performCluster { $0.membership.brokerConnected(now: now) }
        } else {
            performCluster { $0.membership.brokerDisconnected(now: now) }
        }
    }

    /// Takes the membership messages out of a burst from the broker and hands them to the machine;
    /// returns the rest, for the rules.
    func clusterMessagesTaken(from burst: [MQTTMessage]) -> [MQTTMessage] {
        guard let cluster else { return burst }
        var rest: [MQTTMessage] = []
        rest.reserveCapacity(burst.count)
        for message in burst {
            if message.properties.userProperties.contains(cluster.marker) {
                // Published by a member of this group: an echo, whichever member it came back to (§5.4).
                receivedToPusher.increment()
                metrics.messages(bridge: name, rule: "", direction: .mqttToPusher, outcome: .suppressed).increment()
                continue
            }
            guard message.topic.hasPrefix(cluster.settings.membershipTopic + "/") else {
                rest.append(message)
                continue
            }
            clusterMessageReceived(message, cluster: cluster)
        }
        return rest
    }

    /// The user property a member adds to what it publishes from Pusher, `pusher-mqtt-bridge-cluster:
    /// <group>`: no member of the group sends such a message to Pusher again (docs/contract.md §7.4,
    /// "loops"). Empty without a cluster.
    var clusterMarker: [MQTTUserProperty] {
        cluster.map { [$0.marker] } ?? []
    }

    private func clusterMessageReceived(_ message: MQTTMessage, cluster: BridgeCluster) {
        let now = ContinuousClock.now
        let payload = message.payload
        switch cluster.settings.classify(topic: message.topic) {
        case .member(let instance):
            if payload.isEmpty {
                // A Will names the process whose record it deletes (BridgeCluster.willUserProperties).
                let properties = message.properties.userProperties
                let will = properties.first { $0.name == "incarnation" }.map { incarnation in
                    ClusterWillOrigin(
                        incarnation: incarnation.value,
                        startedAt: properties.first { $0.name == "started_at" }.flatMap { Int64($0.value) } ?? 0)
                }
                performCluster { $0.membership.memberRecordDeleted(instance: instance, byWillOf: will, now: now) }
            } else if let record = ClusterMemberRecord(payload: payload, instance: instance) {
                performCluster { $0.membership.memberRecordReceived(record, now: now) }
            } else {
                clusterBadMessage(message)
            }
        case .heartbeat(let instance):
            guard let heartbeat = ClusterHeartbeat(payload: payload, instance: instance) else { return clusterBadMessage(message) }
            performCluster { $0.membership.heartbeatReceived(heartbeat, now: now) }
        case .held(let instance):
            guard let report = ClusterHeldReport(payload: payload, instance: instance) else { return clusterBadMessage(message) }
            performCluster { $0.membership.heldReported(report, now: now) }
            // Discovery's "alone" test needs to know the bridge is subscribed, whichever member holds the channel.
            discovery.machine.withLock { $0.heldByGroup(report.channels, now: now) }
        case .discovered(let rule):
            let channels: Set<String>
            if payload.isEmpty {
                channels = []
            } else if let list = ClusterDiscoveredList(payload: payload, rule: rule) {
                channels = Set(list.channels)
            } else {
                return clusterBadMessage(message)
            }
            clusterDiscoveredListReceived(rule: rule, channels: channels)
        case nil:
            break  // another level under the membership topic: not ours, and not for the rules either
        }
    }

    /// A membership message that does not parse: counted (`errors_total{kind="cluster"}`) and logged
    /// at most six times a minute; the membership goes on without it.
    private func clusterBadMessage(_ message: MQTTMessage) {
        metrics.errors(bridge: name, kind: "cluster").increment()
        let now = ContinuousClock.now
        guard let cluster else { return }
        let (log, suppressed) = cluster.badMessageLog.withLock { $0.allow(now: now) }
        guard log else { return }
        logger.warning(
            "unreadable cluster membership message ignored",
            metadata: ["mqtt.topic": "\(message.topic)", "bytes": "\(message.payload.count)", "suppressed_logs": "\(suppressed)"])
    }

    /// The group's list for a discovery rule changed: the wanted channels follow, and presence rooms
    /// get (or lose) their mirror on every member, so whichever member holds a room mirrors it.
    private func clusterDiscoveredListReceived(rule: String, channels: Set<String>) {
        guard let cluster else { return }
        let (added, removed) = cluster.view.withLock { view -> ([String], [String]) in
            guard view.discoveryRules.contains(rule) else { return ([], []) }
            let before = view.discovered[rule] ?? []
            view.discovered[rule] = channels
            view.wantedChanged = true
            return (channels.subtracting(before).sorted(), before.subtracting(channels).sorted())
        }
        if rule.hasPrefix("presence:") {
            let receivedAt = UTCTimestamp.now().millisecondsSince1970
            for channel in added { execute(machine.withLock { $0.discoveredRoomJoined(channel, receivedAtMillis: receivedAt) }) }
            for channel in removed { execute(machine.withLock { $0.discoveredRoomLeft(channel, receivedAtMillis: receivedAt) }) }
        }
        clusterWantedChanged()
    }

    /// What the Pusher consumer saw, as far as the cluster cares: confirmed subscriptions, and the
    /// connection's `socket_id` (sent with the held reports).
    func clusterObserved(_ update: PusherUpdate) {
        guard cluster != nil else { return }
        let now = ContinuousClock.now
        switch update {
        case .subscriptionSucceeded(let channel):
            performCluster { $0.membership.channelSubscribed(channel, now: now) }
        case .connectionStateChanged(let change) where change.current == .connected || change.previous == .connected:
            let socketID = change.current == .connected ? change.socketID : nil
            performCluster { $0.membership.pusherConnectionChanged(socketID: socketID, now: now) }
        default:
            break
        }
    }

    /// Another process uses this member's MQTT client id (BridgeRuntime+SessionTakeover.swift): it
    /// took the session (reason 0x8E, or the takeover pattern). This one gives way — it leaves the
    /// broker for good and `/readyz` says why. Nothing without a cluster.
    func clusterSessionTakenOver() {
        guard cluster != nil else { return }
        let now = ContinuousClock.now
        performCluster { $0.membership.sessionTakenOver(now: now) }
    }

    /// The `socket_id` an MQTT → Pusher event for `channel` goes out with: the holder's when another
    /// member holds the channel (so that Pusher does not deliver it to the holder, which would
    /// publish it back to MQTT), else `own`.
    func clusterSocketID(for channel: String, own: String?) -> String? {
        guard let cluster else { return own }
        let now = ContinuousClock.now
        return cluster.view.withLock { $0.membership.holderSocketID(of: channel, now: now) } ?? own
    }

    /// The configuration's channels (the bridge machine's subscribe and unsubscribe): in a
    /// cluster they are wanted by the group rather than subscribed here. Returns false without a cluster.
    func clusterConfiguredChannel(_ channel: String, wanted: Bool) -> Bool {
        guard let cluster else { return false }
        cluster.view.withLock { view in
            if wanted { view.configured.insert(channel) } else { view.configured.remove(channel) }
            view.wantedChanged = true
        }
        return true
    }

    /// Tells the machine the channels the group wants, when they changed.
    func clusterWantedChanged() {
        guard cluster != nil else { return }
        let now = ContinuousClock.now
        performCluster { view in
            guard view.wantedChanged else { return [] }
            view.wantedChanged = false
            return view.membership.channelsWanted(view.wanted, now: now)
        }
    }

    // MARK: Discovery in a cluster

    /// Whether this member polls `rule` (docs/contract.md §7.4, "discovery"). True without a cluster.
    func clusterPollsDiscovery(rule: String) -> Bool {
        guard let cluster else { return true }
        let now = ContinuousClock.now
        return cluster.view.withLock { $0.membership.isDiscoveryOwner(rule: rule, now: now) }
    }

    /// A poll this member made as the rule's owner succeeded: its list may be published from now on.
    func clusterDiscoveryPolled(rule: String) {
        cluster?.view.withLock { _ = $0.polledAsOwner.insert(rule) }
    }

    /// Discovery joined or left a channel for `rule` on this member: in a cluster this only
    /// changes the member's own list, which it publishes when it owns the rule.
    func clusterDiscoveryChanged(rule: String, channel: String, joined: Bool) {
        cluster?.view.withLock { view in
            if joined { view.localDiscovered[rule, default: []].insert(channel) } else { view.localDiscovered[rule]?.remove(channel) }
        }
    }

    /// Publishes this member's discovered lists that differ from the group's, for the rules it owns
    /// and has polled.
    func clusterPublishDiscovered() {
        guard let cluster else { return }
        let now = ContinuousClock.now
        let lists = cluster.view.withLock { view -> [ClusterDiscoveredList] in
            view.polledAsOwner.sorted().compactMap { rule in
                guard view.membership.isDiscoveryOwner(rule: rule, now: now) else {
                    view.polledAsOwner.remove(rule)
                    return nil
                }
                let local = view.localDiscovered[rule] ?? []
                guard local != view.discovered[rule] ?? [] else { return nil }
                return ClusterDiscoveredList(rule: rule, channels: local.sorted())
            }
        }
        for list in lists {
            cluster.outgoing.continuation.yield(
                .message(
                    MQTTMessage(
                        topic: cluster.settings.discoveredTopic(rule: list.rule), payload: list.payload, qos: .atLeastOnce, retain: true)))
        }
    }

    /// Rules this member has just come to own are polled at once, not at their next interval.
    private func clusterCheckDiscoveryOwnership(_ cluster: BridgeCluster) {
        guard !cluster.view.withLock({ $0.discoveryRules.isEmpty }) else { return }
        let now = ContinuousClock.now
        let gained = cluster.view.withLock { view -> [String] in
            let owned = Set(view.discoveryRules.filter { view.membership.isDiscoveryOwner(rule: $0, now: now) })
            defer {
                view.ownedRules = owned
                view.polledAsOwner.formIntersection(owned)
            }
            return owned.subtracting(view.ownedRules).sorted()
        }
        guard !gained.isEmpty else { return }
        discovery.machine.withLock { machine in
            for rule in gained { machine.pollSoon(rule: rule, now: now) }
        }
    }

    // MARK: Stop

    /// SIGTERM in a cluster: the record goes first, then every channel is handed over (each until
    /// its new holder reports it, at most the 5 s handover timeout); returns when that is done (at
    /// most a second later), with the record's deletion handed to the MQTT client. The shutdown
    /// grace starts after it. Called once (``stop(grace:)``).
    func clusterLeave() async {
        guard let cluster else { return }
        let now = ContinuousClock.now
        performCluster { $0.membership.leaveRequested(now: now) }
        if !cluster.view.withLock({ $0.leaveCompleted }) {
            let limit = now + cluster.settings.handoverTimeout + .seconds(1)
            try? await withDeadline(limit) {
                for await _ in cluster.leaveWake.stream { return }
            }
        }
        await withCheckedContinuation { continuation in cluster.outgoing.continuation.yield(.barrier(continuation)) }
        logger.info("left the cluster", metadata: ["cluster.group": "\(cluster.settings.group)"])
    }

    // MARK: Status

    /// Why this member is not ready (`/readyz`, STATUS=), nil when it takes part normally or
    /// without a cluster.
    var clusterReadinessProblem: String? {
        cluster?.view.withLock { $0.membership.readinessProblem }
    }

    /// `cluster factory, member a of 3 (a, b, c), holds 17 channels`, nil without a cluster.
    var clusterSummary: String? {
        guard let cluster else { return nil }
        let now = ContinuousClock.now
        let (members, held) = cluster.view.withLock { ($0.membership.owningMembers(now: now), $0.membership.heldChannels.count) }
        let names = members.isEmpty ? "none" : members.joined(separator: ", ")
        return "cluster \(cluster.settings.group), member \(cluster.settings.instance) of \(members.count) (\(names)), "
            + "holds \(held) channels"
    }

    // MARK: Carrying out the machine's actions

    /// Runs `event` on the cluster's view under its lock, then carries out the actions.
    func performCluster(_ event: (inout BridgeCluster.View) -> [ClusterAction]) {
        guard let cluster else { return }
        let actions = cluster.view.withLock { event(&$0) }
        for action in actions {
            if let message = cluster.message(for: action) {
                cluster.outgoing.continuation.yield(.message(message))
                continue
            }
            switch action {
            case .subscribeChannel(let channel):
                pusher.subscribe(channel)
            case .unsubscribeChannel(let channel):
                pusher.unsubscribe(channel)
                let receivedAt = UTCTimestamp.now().millisecondsSince1970
                execute(machine.withLock { $0.channelReleased(channel, receivedAtMillis: receivedAt) })
            case .publishHeld(let report):
                cluster.view.withLock { view in
                    view.pendingHeld = report
                    if view.pendingHeldDue == nil { view.pendingHeldDue = .now + BridgeCluster.heldReportDelay }
                }
            case .leaveCompleted:
                cluster.view.withLock { $0.leaveCompleted = true }
                cluster.leaveWake.continuation.yield()
            case .report(let event):
                clusterReport(event)
            case .publishRecord, .deleteRecord, .publishHeartbeat, .publishMemberOffline:
                break  // published above
            }
        }
        // Also without actions: the end of the observation changes who owns the discovery rules.
        clusterCheckDiscoveryOwnership(cluster)
        let now = ContinuousClock.now
        let (members, held) = cluster.view.withLock { ($0.membership.owningMembers(now: now).count, $0.membership.heldChannels.count) }
        metrics.clusterMembers(bridge: name).record(members)
        metrics.clusterChannelsHeld(bridge: name).record(held)
    }

    /// Logs and counts what happened in the membership.
    private func clusterReport(_ event: ClusterEvent) {
        switch event {
        case .memberJoined(let instance):
            logger.notice("cluster member joined", metadata: ["cluster.member": "\(instance)"])
        case .memberLeft(let instance):
            logger.notice("cluster member left", metadata: ["cluster.member": "\(instance)"])
        case .memberTimedOut(let instance):
            logger.warning("cluster member timed out: no heartbeat", metadata: ["cluster.member": "\(instance)"])
        case .channelsTaken(let channels):
            metrics.clusterTakeovers(bridge: name).increment(by: channels.count)
            logger.info(
                "cluster: channels taken", metadata: ["channels": "\(channels.count)", "pusher.channel": "\(channels.first ?? "")"])
        case .channelsHandedOver(let channels, let confirmed):
            metrics.clusterHandovers(bridge: name, confirmed: confirmed).increment(by: channels.count)
            logger.info(
                "cluster: channels handed over",
                metadata: ["channels": "\(channels.count)", "confirmed": "\(confirmed)", "pusher.channel": "\(channels.first ?? "")"])
        case .channelsDropped(let channels):
            logger.info("cluster: channels no longer wanted", metadata: ["channels": "\(channels.count)"])
        case .releasedAll(let count):
            logger.warning("cluster: released every channel (broker lost or process stalled)", metadata: ["channels": "\(count)"])
        case .stalled(let duration):
            logger.warning("cluster: this process stalled longer than member_timeout; starting over", metadata: ["stalled": "\(duration)"])
            // A survivor may have written `offline` for this member meanwhile.
            commands.continuation.yield(.publishStatus(topic: connection.effectiveStatusTopic, payload: "online"))
        case .duplicateInstance(let other):
            logger.error(
                "cluster: another live process uses this instance name; give each member its own instance",
                metadata: ["cluster.instance": "\(cluster?.settings.instance ?? "")", "cluster.other_incarnation": "\(other)"])
        case .duplicateInstanceCleared:
            logger.notice("cluster: the duplicate instance is gone")
        case .gaveWay(let other):
            logger.critical(
                "cluster: another process uses this instance and its MQTT client id; giving way: no broker connection until restarted",
                metadata: [
                    "cluster.instance": "\(cluster?.settings.instance ?? "")", "mqtt.client_id": "\(connection.effectiveMQTTClientID)",
                    "cluster.other_incarnation": "\(other ?? "unknown")",
                ])
            // At once, not in a task: a reconnect of this process now would take the session from
            // the newer one again and could make it recognise the takeover too.
            mqtt.requestShutdown()
        }
    }
}
