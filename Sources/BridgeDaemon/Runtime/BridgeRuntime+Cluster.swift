import BridgeCore
import Logging
import MQTTVocabulary
import MosquittoClient
import PusherChannels

/// A cluster at work (docs/contract.md §7.4): the broker's membership messages and the member's
/// MQTT and Pusher events go to the supervisor (BridgeCore's ``BridgeSupervisor``, which holds the
/// ``ClusterMembership``); its membership publishes go out here, in order, and the stopping
/// bridge hands its channels over here.
extension BridgeRuntime {
    /// Subscribes the membership filter and publishes membership messages in order until the
    /// bridge stops, each after the broker acknowledged the one before. A publish that fails (no
    /// connection) is dropped: the machine publishes its record and heartbeat again after the next connect.
    func runCluster() async {
        guard let cluster else { return }
        for await item in cluster.outgoing.stream {
            switch item {
            case .subscribe(let subscription):
                await subscribeTopicFilter(subscription)
            case .message(let message):
                do { try await mqtt.publish(message) } catch {
                    logger.debug("cluster message not published", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
                }
            case .barrier(let continuation):
                continuation.resume()
            }
        }
        cluster.outgoing.continuation.finish()
    }

    /// Takes the cluster's messages out of a burst from the broker (echoes of the group's own
    /// publishes, membership messages) and hands them to the supervisor; returns the rest, for the rules.
    func clusterMessagesTaken(from burst: [MQTTMessage]) -> [MQTTMessage] {
        guard cluster != nil else { return burst }
        var rest: [MQTTMessage] = []
        rest.reserveCapacity(burst.count)
        for message in burst {
            let properties = message.properties.userProperties
            guard decisions.withLock({ $0.supervisor.isClusterMessage(topic: message.topic, userProperties: properties) }) else {
                rest.append(message)
                continue
            }
            perform { $0.clusterMessageReceived(topic: message.topic, payload: message.payload, userProperties: properties, $1) }
        }
        return rest
    }

    /// The user property a member adds to what it publishes from Pusher, `pusher-mqtt-bridge-cluster:
    /// <group>`: no member of the group sends such a message to Pusher again (docs/contract.md §7.4,
    /// "loops"). Empty without a cluster.
    var clusterMarker: [MQTTUserProperty] {
        cluster.map { [$0.marker] } ?? []
    }

    /// The `socket_id` an MQTT → Pusher event for `channel` goes out with: the holder's when another
    /// member holds the channel (so that Pusher does not deliver it to the holder, which would
    /// publish it back to MQTT), else `own`.
    func clusterSocketID(for channel: String, own: String?) -> String? {
        guard cluster != nil else { return own }
        let now = ContinuousClock.now
        return decisions.withLock { $0.supervisor.socketID(for: channel, own: own, now: now) }
    }

    // MARK: Stop

    /// SIGTERM in a cluster: the record goes first, then every channel is handed over (each until
    /// its new holder reports it, at most the 5 s handover timeout); returns when that is done (at
    /// most a second later), with the record's deletion handed to the MQTT client. The shutdown
    /// grace starts after it. Called once (``stop(grace:)``).
    func clusterLeave() async {
        guard let cluster else { return }
        let now = ContinuousClock.now
        perform { $0.leaveRequested($1) }
        if !decisions.withLock({ $0.supervisor.cluster?.leaveCompleted ?? true }) {
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
        decisions.withLock { $0.supervisor.cluster?.membership.readinessProblem }
    }

    /// `cluster factory, member a of 3 (a, b, c), holds 17 channels`, nil without a cluster.
    var clusterSummary: String? {
        let now = ContinuousClock.now
        return decisions.withLock { $0.supervisor.clusterSummary(now: now) }
    }

    // MARK: Carrying out the supervisor's reports

    /// Logs and counts what happened in the membership.
    func clusterReport(_ event: ClusterEvent) {
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
            // The supervisor publishes `online` again next: a survivor may have written `offline` meanwhile.
            logger.warning("cluster: this process stalled longer than member_timeout; starting over", metadata: ["stalled": "\(duration)"])
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
