/// What ``ClusterMembership`` asks its executor to do, in order.
public enum ClusterAction: Sendable, Equatable {
    /// Publish this member's record, retained, QoS 1, on `<membership_topic>/members/<instance>`.
    case publishRecord(ClusterMemberRecord)
    /// Publish a zero-length retained message on this member's record topic: it leaves the group.
    case deleteRecord
    /// Publish a heartbeat, not retained, QoS 0, on `<membership_topic>/heartbeat/<instance>`.
    case publishHeartbeat(ClusterHeartbeat)
    /// Publish a message about the channels this member is confirmed subscribed to (a snapshot
    /// part or a delta), not retained, QoS 1, on `<membership_topic>/held/<instance>`.
    case publishHeld(ClusterHeldReport)
    /// Ask another member for a full held snapshot: publish, not retained, QoS 1, on
    /// `<membership_topic>/resync/<request.instance>`.
    case requestSnapshot(ClusterSnapshotRequest)
    /// How the next ``subscribeChannel(_:)``'s channel was held before (docs/contract.md §8.1,
    /// "takeover gap"); absent when nobody in the group is known to have held it.
    case takingOver(String, ClusterTakeover)
    /// Subscribe this Pusher channel: this member holds it now.
    case subscribeChannel(String)
    /// Unsubscribe this Pusher channel: another member holds it, or nobody wants it.
    case unsubscribeChannel(String)
    /// A member died holding these channels, and this member does not hold them: until a new
    /// holder reports them, no subscription of the group is in them (channel discovery's counts
    /// then do not include the bridge).
    case holderGone(Set<String>)
    /// Publish retained `offline` on `<status_topic>/<instance>` for a member that died: its Will
    /// went to its record, so one survivor — the one the hashing picks — writes its status.
    case publishMemberOffline(instance: String)
    /// A `leaveRequested` finished: every channel was handed over; the executor may now publish
    /// its own `offline` and disconnect.
    case leaveCompleted
    /// Something to log and count.
    case report(ClusterEvent)
}

/// What happened in the membership, for logs and metrics.
public enum ClusterEvent: Sendable, Equatable {
    /// A member became live (record and a recent heartbeat).
    case memberJoined(instance: String)
    /// A member's record was deleted (it left, or its Will fired).
    case memberLeft(instance: String)
    /// A member's heartbeats stopped for `member_timeout` while its record stayed (hung or cut off).
    case memberTimedOut(instance: String)
    /// This member subscribed channels it now owns.
    case channelsTaken([String])
    /// This member dropped channels it handed over: `confirmed` when the new holder reported them,
    /// else after the handover timeout (or with nobody to hand them to).
    case channelsHandedOver([String], confirmed: Bool)
    /// This member dropped channels nobody wants any more (the channel list changed).
    case channelsDropped([String])
    /// This member lost the broker (or was frozen) and released every channel it held.
    case releasedAll(count: Int)
    /// This member's ticks stopped for longer than `member_timeout` (SIGSTOP, a stalled host): the
    /// others have taken its channels, so it starts over as if it had reconnected.
    case stalled(for: Duration)
    /// Another live process uses this instance name (its heartbeats carry another incarnation).
    case duplicateInstance(otherIncarnation: String)
    /// No heartbeat from a duplicate for `member_timeout`.
    case duplicateInstanceCleared
    /// Another process uses this member's instance and MQTT client id (it took the session, or a
    /// newer process's record appeared): this one leaves the broker for good. The executor stops
    /// its MQTT client.
    case gaveWay(otherIncarnation: String?)
}

/// How a channel this member takes was held before: whether the events since then reached MQTT
/// through its last holder (docs/contract.md §8.1, "takeover gap").
public enum ClusterTakeover: Sendable, Equatable {
    /// Another member holds it and keeps it until this one reports it (a member joined, or one
    /// leaving on SIGTERM hands it over): nothing is missed.
    case handover
    /// Its holder died without handing it over (its Last Will fired, or it sent no heartbeat for
    /// `member_timeout`): what Pusher sent since that member was last heard from may be lost.
    case afterLoss(lastHeard: ContinuousClock.Instant)
}
