import BridgeCore
import MQTTVocabulary
import MosquittoClient

/// The cluster's I/O side for one bridge (docs/contract.md §7.4): the queue of membership
/// publishes, in order, and the stopping bridge's wake-up once its handover is done. What the
/// cluster decides is BridgeCore's (``BridgeSupervisor``, ``SupervisedCluster``); the executor is
/// BridgeRuntime+Cluster.swift.
final class BridgeCluster: Sendable {
    /// A membership publish, the membership subscription made after a connect, or a point the
    /// stopping bridge waits for.
    enum Outgoing: Sendable {
        case message(MQTTMessage)
        /// Waits for the SUBACK before anything queued after it goes out: the member's record,
        /// published after it, then comes back from the broker after the retained records the
        /// subscription asks for (``ClusterMembership``'s observation waits for that echo).
        case subscribe(MQTTSubscription)
        /// Resumed once every publish queued before it was handed to the MQTT client.
        case barrier(CheckedContinuation<Void, Never>)
    }

    let settings: ClusterSettings
    /// The user property on everything members of this group publish from Pusher.
    let marker: MQTTUserProperty
    /// Membership subscriptions and publishes, in order: run by ``BridgeRuntime/runCluster()``.
    let outgoing = AsyncStream.makeStream(of: Outgoing.self)
    /// Wakes the stopping bridge when the supervisor reports `leaveCompleted`.
    let leaveWake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    init(settings: ClusterSettings, marker: MQTTUserProperty) {
        self.settings = settings
        self.marker = marker
    }
}
