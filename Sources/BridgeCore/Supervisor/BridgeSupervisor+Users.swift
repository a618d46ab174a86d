import BridgeVocabulary

/// The bridge's signed-in user (docs/contract.md §8.2): what its connections are told, through
/// ``UsersMirror`` to MQTT.
extension BridgeSupervisor {
    /// `connection` signed in as `userID`, watching `watchlist`.
    public mutating func userSignedIn(connection: Int, userID: String, watchlist: [String], _ now: Now) -> [Action] {
        usersPublish(now) { $0.signedIn(connection: connection, userID: userID, watchlist: watchlist, now: now.instant) }
    }

    /// `connection` is no longer signed in: another connection's view is published, if any.
    public mutating func userSignedOut(connection: Int, _ now: Now) -> [Action] {
        usersPublish(now) { $0.signedOut(connection: connection, now: now.instant) }
    }

    /// A watchlist event on `connection`.
    public mutating func watchlistChanged(connection: Int, online: Bool, userIDs: [String], _ now: Now) -> [Action] {
        usersPublish(now) { $0.watchlistChanged(connection: connection, online: online, userIDs: userIDs, now: now.instant) }
    }

    /// `connection`'s subscription to the bridge user's channel took effect.
    public mutating func userChannelLive(connection: Int, _ now: Now) {
        users?.userChannelLive(connection: connection, now: now.instant)
    }

    /// An event sent to the bridge's user arrived on `connection`. Without `[bridge.users]` it
    /// is counted `unmatched`; a copy another connection delivered first is counted `duplicate`.
    public mutating func userEventReceived(connection: Int, event: String, data: String, _ now: Now) -> [Action] {
        let received = Action.bridge(.received(.pusherToMQTT, by: 1))
        guard users != nil else {
            return [received, .bridge(.count(rule: "", direction: .pusherToMQTT, outcome: .unmatched, by: 1))]
        }
        var publish: MQTTPublish?
        _ = usersPublish(now) { mirror in
            publish = mirror.userEvent(connection: connection, event: event, data: data, now: now.instant)
            return []
        }
        guard let publish else {
            return [received, .bridge(.count(rule: "", direction: .pusherToMQTT, outcome: .duplicate, by: 1))]
        }
        return [received, .bridge(.enqueueToMQTT(publish, receivedAtMillis: now.millis))]
    }

    /// The ids the published watchlist view reports online (the `watchlist_online` gauge).
    public var watchlistOnline: Int { users?.online.count ?? 0 }

    /// What `body` makes the mirror publish, as actions: each message counted as received, then
    /// appended to the outbox. Nothing without `[bridge.users]`.
    mutating func usersPublish(_ now: Now, _ body: (inout UsersMirror) -> [MQTTPublish]) -> [Action] {
        guard var mirror = users else { return [] }
        users = nil  // the mirror is changed in place, not copied
        let publishes = body(&mirror)
        users = mirror
        guard !publishes.isEmpty else { return [] }
        return [.bridge(.received(.pusherToMQTT, by: publishes.count))]
            + publishes.map { .bridge(.enqueueToMQTT($0, receivedAtMillis: now.millis)) }
    }
}
