import BridgeCore
import Locking
import MosquittoClient

/// Everything the runtime's one lock guards (``BridgeRuntime/decisions``): the supervisor, the
/// two pure parts BridgeCore cannot hold because their types are the MQTT client's (the session
/// takeover detector, and the correlation of publishes with the client's acknowledgements), and
/// the tasks waiting for a decision (lanes held by the 403 pause, webhook requests waiting for
/// their turn at the outbox, publishers waiting for the next MQTT state, and those waiting for
/// the end of `run()`): the bridge's one lock. No I/O and no other lock under it.
struct RuntimeDecisions: Sendable {
    typealias Correlation = PublishCorrelation<MQTTPublishID, OutboxEntry<OutgoingMQTT>, MQTTPublishCompletion>

    var supervisor: BridgeSupervisor
    /// Home Assistant discovery's decisions (docs/contract.md §8.3, BridgeRuntime+HomeAssistant.swift).
    var homeAssistant: HomeAssistantPublisher<ContinuousClock.Instant>
    /// True while a task carries out Home Assistant actions it took (one at a time, in order), and
    /// the stopping bridge waiting for it to finish before its own last ones.
    var homeAssistantBusy = false
    var homeAssistantIdleWaiters = WaiterQueue<Bool>()
    /// The Pusher clients by connection and the HTTP API client, replaced by a reload that changes
    /// `[bridge.pusher]` (PusherSlots.swift).
    var pusherSlots: PusherSlotsState
    /// The bridge's Pusher connections seen as one: their merge, coverage and gaps, and presence
    /// (docs/pusher-merge.md).
    var pusherConnections: PusherConnectionSet
    /// Another process taking the MQTT session over (BridgeRuntime+SessionTakeover.swift).
    var sessionTakeover = MQTTSessionTakeoverDetector()
    /// Shared subscriptions the broker refused, by filter, until one is granted (SharedSubscriptionRefusal.swift).
    var refusedSharedSubscriptions: [String: SharedSubscriptionRefusal] = [:]
    /// Publishes in flight to the broker, paired with their acknowledgements.
    var correlation = Correlation()
    /// Whether ``BridgeRuntime/run()`` runs, and the tasks waiting for it to have released everything.
    var lifecycle = RuntimeLifecycle()
    /// MQTT → Pusher lanes waiting while delivery is paused, woken when it resumes or the bridge stops.
    var pausedLanes = WaiterQueue<Void>()
    /// Set once the lanes stop (the bridge stops): from then on no lane waits for the pause.
    var pausedLanesReleased = false
    /// Webhook requests waiting for their turn at the outbox: all woken when a turn ends, each
    /// looks whether it is its own.
    var webhookTurns = WaiterQueue<Void>()
    /// How many MQTT connection states the state watcher has taken in, and the publishers waiting
    /// for the next one (the client refused a publish as not connected before the watcher saw the drop).
    var mqttStates: UInt64 = 0
    var mqttStateWaiters = WaiterQueue<Void>()
    /// A reload replacing the Pusher connections, waiting for a connection to hold its channels:
    /// woken whenever a connection's state or a subscription changes (BridgeRuntime+PusherReplacement.swift).
    var coverageWaiters = WaiterQueue<Void>()
    /// `[bridge.pusher] drain_rate`: the pace of the MQTT → Pusher backlog, shared by the lanes
    /// (docs/contract.md §8.3); nil when not paced.
    var drainToPusher: DrainPacer?

    /// The decisions of a bridge about to start: Home Assistant discovery per `homeAssistant` (off
    /// by default), the rest as given or empty.
    init(
        supervisor: BridgeSupervisor, homeAssistant: HomeAssistantSettings = HomeAssistantSettings(),
        pusherSlots: PusherSlotsState = PusherSlotsState(clients: [], rest: nil),
        pusherConnections: PusherConnectionSet = PusherConnectionSet(connections: 1), drainToPusher: DrainPacer? = nil
    ) {
        self.supervisor = supervisor
        self.homeAssistant = HomeAssistantPublisher(bridge: supervisor.bridge.settings, settings: homeAssistant)
        self.pusherSlots = pusherSlots
        self.pusherConnections = pusherConnections
        self.drainToPusher = drainToPusher
    }
}
