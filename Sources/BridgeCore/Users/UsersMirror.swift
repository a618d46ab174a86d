import BridgeVocabulary

/// `[bridge.users]`: the bridge's signed-in user, mirrored to MQTT (docs/contract.md §8.2). Pure:
/// events take `now`, and it returns the messages to publish.
///
/// - `<topic>/<id>/online`, retained `"true"`/`"false"`, for the ids the bridge watches;
/// - `<topic>/<bridge user>/events/<event>`: events sent to the bridge's user (`sendToUser`).
///
/// Every connection of the bridge signs in, and each is told the same things. Each connection's
/// view (who is online) is kept; the view of the lowest-numbered signed-in connection is the one
/// published, and when that connection goes, the next one's view is published in its place
/// (only what differs). Events to the user go through a ``PusherEventMerge`` of their own (the
/// user's channel is one more channel to it, live on a connection from its
/// `subscription_succeeded`): the first copy from any connection goes out, the others are
/// duplicates, so one connection's close or rejoin loses none (docs/pusher-merge.md).
///
/// Pusher reports who is online when a connection signs in, and only then who comes and goes: it
/// never says "offline" for a user who was not online. So an id is published `"false"` only once
/// the view has had ``settleTime`` after its sign-in to hear that the id is online; before that an
/// id not heard of is left as it was.
public struct UsersMirror: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// The `rule` label of the mirror's messages (`messages_total{rule="users"}`).
    public static let rule = "users"
    /// How long after a sign-in the watchlist's first events are awaited.
    public static let settleTime = Duration.seconds(2)

    /// What one connection was told.
    struct View: Sendable, Equatable {
        var userID: String
        var watchlist: [String]
        var online: Set<String> = []
        /// Heard going offline since the sign-in.
        var offline: Set<String> = []
        var settlesAt: Instant
        var settled = false
    }

    public let settings: UsersSettings
    private var views: [Int: View] = [:]
    /// The merge of the connections' copies of events to the user.
    private var merge: PusherEventMerge
    /// The merge's name for the user's channel (one user per bridge).
    private static let channel = "#server-to-user"
    /// What was last published per id (retained on the broker).
    public private(set) var published: [String: Bool] = [:]

    /// A mirror for a bridge with `connections` Pusher connections.
    public init(settings: UsersSettings, connections: Int = 1) {
        self.settings = settings
        self.merge = PusherEventMerge(connections: connections)
    }

    /// The connection whose view is published.
    public var primary: Int? { views.keys.min() }

    /// The ids the published view reports online.
    public var online: Set<String> { primary.flatMap { views[$0]?.online } ?? [] }

    /// When ``tick(now:)`` has something to do.
    public var nextDeadline: Instant? {
        guard let primary, let view = views[primary], !view.settled else { return nil }
        return view.settlesAt
    }

    // MARK: events

    /// `connection` signed in as `userID`, watching `watchlist`.
    public mutating func signedIn(connection: Int, userID: String, watchlist: [String], now: Instant) -> [MQTTPublish] {
        views[connection] = View(userID: userID, watchlist: watchlist, settlesAt: now + Self.settleTime)
        return reconcile(now: now)
    }

    /// `connection` is no longer signed in (it dropped, or is being replaced).
    public mutating func signedOut(connection: Int, now: Instant) -> [MQTTPublish] {
        merge.connectionLost(connection, channel: Self.channel)
        guard views.removeValue(forKey: connection) != nil else { return [] }
        return reconcile(now: now)
    }

    /// `connection`'s subscription to the user's channel took effect: it receives events to the
    /// user from now on.
    public mutating func userChannelLive(connection: Int, now: Instant) {
        merge.connectionLive(connection, channel: Self.channel, now: now)
    }

    /// A watchlist event on `connection`: `userIDs` came online (`online`) or went offline.
    public mutating func watchlistChanged(connection: Int, online: Bool, userIDs: [String], now: Instant) -> [MQTTPublish] {
        guard var view = views[connection] else { return [] }
        if online {
            view.online.formUnion(userIDs)
            view.offline.subtract(userIDs)
        } else {
            view.online.subtract(userIDs)
            view.offline.formUnion(userIDs)
        }
        views[connection] = view
        return reconcile(now: now)
    }

    /// An event sent to the bridge's user arrived on `connection`: the message to publish, or
    /// `nil` when it is a copy of one another connection delivered first.
    public mutating func userEvent(connection: Int, event: String, data: String, now: Instant) -> MQTTPublish? {
        let key = PusherEventKey(name: event, data: data, userID: nil)
        guard merge.event(connection: connection, channel: Self.channel, key: key, now: now) == .publish,
            let view = views[connection] ?? primary.flatMap({ views[$0] })
        else { return nil }
        let topic = settings.topic + "/" + TopicLevelEscaping.escape(view.userID) + "/events/" + TopicLevelEscaping.escape(event)
        return MQTTPublish(rule: Self.rule, topic: topic, payload: Array(data.utf8), qos: settings.qos, retain: false)
    }

    /// Time passed: ids the settled view did not hear of are published offline.
    public mutating func tick(now: Instant) -> [MQTTPublish] {
        reconcile(now: now)
    }

    // MARK: publishing

    /// The topic of `id`'s online state.
    public func onlineTopic(_ id: String) -> String {
        settings.topic + "/" + TopicLevelEscaping.escape(id) + "/online"
    }

    private mutating func reconcile(now: Instant) -> [MQTTPublish] {
        guard let primary, var view = views[primary] else { return [] }
        if !view.settled, now >= view.settlesAt {
            view.settled = true
            views[primary] = view
        }
        var publishes: [MQTTPublish] = []
        func publish(_ id: String, _ value: Bool) {
            guard published[id] != value else { return }
            published[id] = value
            publishes.append(
                MQTTPublish(
                    rule: Self.rule, topic: onlineTopic(id), payload: Array((value ? "true" : "false").utf8), qos: settings.qos,
                    retain: true))
        }
        for id in view.online.sorted() { publish(id, true) }
        for id in view.offline.sorted() { publish(id, false) }
        if view.settled {
            for id in view.watchlist where !view.online.contains(id) { publish(id, false) }
            // Online once, now gone from this view and not watched: offline as well.
            for (id, value) in published.sorted(by: { $0.key < $1.key }) where value && !view.online.contains(id) { publish(id, false) }
        }
        return publishes
    }
}
