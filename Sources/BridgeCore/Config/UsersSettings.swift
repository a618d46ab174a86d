/// `[bridge.users]`: what the bridge's signed-in user sees, mirrored to MQTT (docs/contract.md §8.2).
///
/// - `<topic>/<id>/online`: retained `"true"`/`"false"` for each id of `[bridge.pusher] watchlist`,
///   from the watchlist's online/offline events;
/// - `<topic>/<bridge user>/events/<event>`: events sent to the bridge's own user (the HTTP
///   API's `sendToUser`), the event's data as the payload.
public struct UsersSettings: Sendable, Equatable {
    /// `topic` (required): the prefix; no placeholders, no trailing `/`.
    public var topic: String
    /// `qos`, default 1, for both kinds of message.
    public var qos: Int

    public init(topic: String, qos: Int = 1) {
        self.topic = topic
        self.qos = qos
    }
}
