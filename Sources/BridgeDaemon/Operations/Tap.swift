import BridgeCore
import Logging
import PusherChannels

/// `pusher-mqtt-bridge tap`: subscribe with a bridge's Pusher settings and print each event as one
/// JSON line — mosquitto_sub for Pusher (docs/contract.md §3).
public enum Tap {
    /// The JSON line for an application event: `{"channel","event","data","user_id"?}`, `data`
    /// exactly as received (a JSON string holding the raw text).
    public static func line(for event: PusherEvent) -> String? {
        guard let channel = event.channel else { return nil }
        var out = "{\"channel\":" + JSONText.quoted(channel) + ",\"event\":" + JSONText.quoted(event.name)
        out += ",\"data\":" + (event.data.map { JSONText.quoted($0) } ?? "null")
        if let userID = event.userID { out += ",\"user_id\":" + JSONText.quoted(userID) }
        return out + "}"
    }

    /// The JSON line for a presence change: `pusher:subscription_succeeded` with `members`
    /// (`{"<id>":<info>}`), `pusher:member_added` with `user_id`/`user_info`, `pusher:member_removed`.
    public static func line(for change: PusherPresenceChange) -> String {
        switch change {
        case .subscriptionSucceeded(let channel, let members, _):
            let body = members.map { JSONText.quoted($0.userID) + ":" + info($0.userInfo) }.joined(separator: ",")
            return "{\"channel\":\(JSONText.quoted(channel)),\"event\":\"pusher:subscription_succeeded\",\"members\":{\(body)}}"
        case .memberAdded(let channel, let member):
            return
                "{\"channel\":\(JSONText.quoted(channel)),\"event\":\"pusher:member_added\",\"user_id\":\(JSONText.quoted(member.userID)),\"user_info\":\(info(member.userInfo))}"
        case .memberRemoved(let channel, let member):
            return
                "{\"channel\":\(JSONText.quoted(channel)),\"event\":\"pusher:member_removed\",\"user_id\":\(JSONText.quoted(member.userID))}"
        }
    }

    /// `user_info` is raw JSON text from the server; absent info is `{}` (as docs/contract.md §5.3 mirrors it).
    private static func info(_ raw: String?) -> String {
        guard let raw, !raw.isEmpty else { return "{}" }
        return raw
    }

    /// Subscribes `channels` with `settings`' Pusher options and calls `emit` with every line until
    /// the task is cancelled. Connection changes and errors are logged (stderr).
    public static func run(settings: BridgeSettings, channels: [String], logger: Logger, emit: @escaping @Sendable (String) -> Void)
        async throws
    {
        let client = PusherClient(options: try ClientSettings.pusherOptions(settings), logger: logger)
        for channel in channels { _ = client.subscribe(channel) }
        client.connect()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await client.run() }
            group.addTask {
                for await update in client.updates() {
                    switch update {
                    case .event(let event):
                        if !event.isProtocolEvent, let line = line(for: event) { emit(line) }
                    case .presence(let change):
                        emit(line(for: change))
                    case .subscriptionSucceeded(let channel):
                        logger.info("subscribed", metadata: ["pusher.channel": "\(channel)"])
                    case .subscriptionFailed(let channel, let error):
                        logger.error("subscription failed", metadata: ["pusher.channel": "\(channel)", "error": "\(error)"])
                    case .connectionStateChanged(let change):
                        logger.info("pusher \(change.current.rawValue)", metadata: ["pusher.socket_id": "\(change.socketID ?? "")"])
                    case .error(let error):
                        logger.warning("pusher error", metadata: ["error": "\(error)"])
                    case .user(.event(let event)):
                        if let line = line(for: event) { emit(line) }
                    case .user(let update):
                        logger.info("pusher user update", metadata: ["update": "\(update)"])
                    }
                }
            }
            try await group.next()
            group.cancelAll()
        }
    }
}
