import BridgeCore
import Foundation
import PusherProtocol

@testable import PusherChannels
@testable import PusherLocal

/// The user-level protocol of pusher-local (docs/pusher-protocol.md §1, "User sign-in"):
/// `pusher:signin`, `#server-to-user-` subscriptions and deliveries, terminations, closes and
/// watchlist events on one hub with watchlist events on.
enum UserTargets {
    /// Each line acts for one of three connections (line number mod 3), or says what to do:
    ///
    /// - `@signin USER_DATA`: a correctly signed `pusher:signin` with that `user_data`;
    /// - `@send USER`: an HTTP publish on `#server-to-user-USER` (validated first);
    /// - `@terminate USER`: `terminate_connections`, whose closes take effect at once;
    /// - `@drop`: the connection ends and a new one takes its place;
    /// - anything else: a client frame as it is.
    ///
    /// Checks: every frame is valid JSON and readable by the client's parser; closes are 4009 and
    /// only to that user's signed-in connections; `#server-to-user-U` is only ever held by
    /// connections signed in as U; a watcher never hears `online` for a user it already heard
    /// online (nor `offline` twice), and what it heard matches who is online on its watchlist.
    static func users(_ input: Input) -> Int32 {
        let t0 = ContinuousClock.now
        var hub = AppHub(app: PusherLocalApp(id: "1", key: PusherTargets.key, secret: PusherTargets.secret), activityTimeoutSeconds: 120)
        hub.watchlistEvents = true
        var slots = [ConnectionID(1), ConnectionID(2), ConnectionID(3)]
        var next: UInt64 = 4
        /// What each connection has heard: online users per watcher.
        var heard: [ConnectionID: Set<String>] = [:]
        for id in slots { check(hub.connected(id, socketID: socketID(id)), &heard) }
        for (number, line) in input.lines.prefix(64).enumerated() {
            let slot = number % 3
            let id = slots[slot]
            let now = t0 + .milliseconds(number * 300)
            if line.hasPrefix("@signin ") {
                let userData = String(line.dropFirst(8))
                let auth = PusherAuth.userAuth(
                    key: PusherTargets.key, secret: PusherTargets.secret, socketID: socketID(id), userData: userData)
                let frame =
                    "{\"event\":\"pusher:signin\",\"data\":{\"auth\":" + jsonQuoted(auth) + ",\"user_data\":" + jsonQuoted(userData) + "}}"
                check(hub.received(frame, from: id, now: now), &heard)
            } else if line.hasPrefix("@send ") {
                let request = PublishRequest(name: "e", data: "{}", channels: [UserID.serverToUserChannel(String(line.dropFirst(6)))])
                if AppHub.validate(request) == nil { check(hub.publish(request, now: now), &heard) }
            } else if line.hasPrefix("@terminate ") {
                let userID = String(line.dropFirst(11))
                let signedIn = Set(hub.users[userID] ?? [])
                let actions = hub.terminateUserConnections(userID)
                for action in actions {
                    guard case .close(let closed, let code, _) = action, code == 4009, signedIn.contains(closed) else {
                        violated("terminate of \(userID) did \(action)")
                    }
                    check(hub.disconnected(closed), &heard)
                    heard[closed] = nil
                    let replacement = ConnectionID(next)
                    next += 1
                    if let index = slots.firstIndex(of: closed) { slots[index] = replacement }
                    check(hub.connected(replacement, socketID: socketID(replacement)), &heard)
                }
            } else if line == "@drop" {
                check(hub.disconnected(id), &heard)
                heard[id] = nil
                slots[slot] = ConnectionID(next)
                next += 1
                check(hub.connected(slots[slot], socketID: socketID(slots[slot])), &heard)
            } else {
                check(hub.received(line, from: id, now: now), &heard)
            }
            checkState(hub, heard)
        }
        return 0
    }

    static func socketID(_ id: ConnectionID) -> String { "\(id.rawValue).\(id.rawValue)" }

    /// Every frame valid and readable; watchlist events applied to what each recipient heard.
    static func check(_ actions: [HubAction], _ heard: inout [ConnectionID: Set<String>]) {
        for action in actions {
            switch action {
            case .send(let id, let frame):
                PusherTargets.checkServerFrame(frame)
                apply(frame, to: [id], &heard)
            case .deliver(let frame, let ids):
                PusherTargets.checkServerFrame(frame)
                apply(frame, to: ids, &heard)
            case .close(_, let code, _):
                if code != 4009 { violated("close code \(code) from the user protocol") }
            case .webhook(let event):
                if UserID.ofServerToUserChannel(event.channel) != nil { violated("webhook for \(event.channel)") }
            }
        }
    }

    static func apply(_ frame: String, to ids: [ConnectionID], _ heard: inout [ConnectionID: Set<String>]) {
        // A (new) sign-in starts the watcher's view afresh: its initial `online` event follows.
        if frame.hasPrefix("{\"event\":\"pusher:signin_success\"") {
            for id in ids { heard[id] = [] }
            return
        }
        guard frame.contains("pusher_internal:watchlist_events") else { return }
        guard let data = (try? JSONValue.parse(frame))?["data"]?.stringValue, let events = try? JSONValue.parse(data),
            case .array(let list)? = events["events"]
        else { violated("unreadable watchlist frame \(frame)") }
        for event in list {
            guard let name = event["name"]?.stringValue, case .array(let userIDs)? = event["user_ids"] else {
                violated("watchlist event without name or user_ids: \(frame)")
            }
            for case .string(let userID) in userIDs {
                for id in ids {
                    switch name {
                    case "online":
                        if heard[id, default: []].insert(userID).inserted == false { violated("\(id) heard \(userID) online twice") }
                    case "offline":
                        if heard[id]?.remove(userID) == nil { violated("\(id) heard \(userID) offline while not online") }
                    default: violated("watchlist event \(name)")
                    }
                }
            }
        }
    }

    /// The hub's records agree with each other and with what the watchers heard.
    static func checkState(_ hub: AppHub, _ heard: [ConnectionID: Set<String>]) {
        for (userID, ids) in hub.users {
            if ids.isEmpty { violated("user \(userID) online without connections") }
            for id in ids where hub.connections[id]?.userID != userID { violated("\(id) listed for \(userID) but signed in otherwise") }
        }
        for (id, connection) in hub.connections {
            for channel in connection.channels {
                if let owner = UserID.ofServerToUserChannel(channel), connection.userID != owner {
                    violated("\(id) signed in as \(connection.userID ?? "nobody") holds \(channel)")
                }
            }
            if connection.watchlist.count > PusherLimits.watchlistIDs { violated("watchlist of \(connection.watchlist.count) ids kept") }
            let online = Set(connection.watchlist.filter { hub.users[$0] != nil })
            if connection.userID != nil, heard[id, default: []].intersection(connection.watchlist) != online {
                violated("\(id) heard \(heard[id] ?? []) online; online on its watchlist: \(online)")
            }
        }
    }
}
