/// Builders for the server→client frames of protocol 7 (docs/pusher-protocol.md §1).
///
/// Channel events carry `data` as a JSON-encoded *string* ("double encoding"); `pusher:error`
/// carries an object, as hosted Pusher sends it. Every frame is built once as text and shared by
/// all recipients.
enum ServerFrame {
    /// `pusher:connection_established` with the socket id and the activity timeout in seconds.
    static func connectionEstablished(socketID: String, activityTimeout: Int) -> String {
        let data = "{\"socket_id\":" + jsonQuoted(socketID) + ",\"activity_timeout\":" + String(activityTimeout) + "}"
        return "{\"event\":\"pusher:connection_established\",\"data\":" + jsonQuoted(data) + "}"
    }

    /// `pusher:pong`, the answer to a client's `pusher:ping`.
    static let pong = "{\"event\":\"pusher:pong\",\"data\":\"{}\"}"

    /// `pusher:ping`, sent to a connection that has been silent for the activity timeout.
    static let ping = "{\"event\":\"pusher:ping\",\"data\":\"{}\"}"

    /// `pusher:error` with a message and an optional code (`null` when absent, as hosted Pusher
    /// does for a bad subscription signature).
    static func error(_ message: String, code: Int?) -> String {
        let codeText = code.map { String($0) } ?? "null"
        return "{\"event\":\"pusher:error\",\"data\":{\"message\":" + jsonQuoted(message) + ",\"code\":" + codeText + "}}"
    }

    /// An event on a channel; `data` is sent as a JSON string; `userID` only for client events on
    /// presence channels.
    static func channelEvent(event: String, channel: String, data: String, userID: String? = nil) -> String {
        var frame = "{\"event\":" + jsonQuoted(event) + ",\"channel\":" + jsonQuoted(channel) + ",\"data\":" + jsonQuoted(data)
        if let userID { frame += ",\"user_id\":" + jsonQuoted(userID) }
        frame += "}"
        return frame
    }

    /// `pusher_internal:watchlist_events` (no channel) with data
    /// `{"events":[{"name":"online"|"offline","user_ids":[…]}]}` as a JSON string.
    static func watchlistEvents(name: String, userIDs: [String]) -> String {
        let data =
            "{\"events\":[{\"name\":" + jsonQuoted(name) + ",\"user_ids\":[" + userIDs.map(jsonQuoted).joined(separator: ",") + "]}]}"
        return "{\"event\":\"pusher_internal:watchlist_events\",\"data\":" + jsonQuoted(data) + "}"
    }

    /// `pusher:cache_miss` on a cache channel that has no event to replay.
    static func cacheMiss(channel: String) -> String {
        "{\"event\":\"pusher:cache_miss\",\"channel\":" + jsonQuoted(channel) + "}"
    }
}
