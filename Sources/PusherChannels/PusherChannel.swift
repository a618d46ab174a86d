import PusherProtocol

/// A handle to a channel of a ``PusherClient`` (cheap to copy; the client holds the state).
public struct PusherChannel: Sendable {
    /// The channel name.
    public let name: String
    /// The client it belongs to.
    public let client: PusherClient

    /// The channel's kind by name prefix.
    public var kind: ChannelKind { ChannelName(name).kind }
    /// Whether the server confirmed the subscription on the current connection.
    public var isSubscribed: Bool { client.isSubscribed(name) }
    /// The channel's connection count as last announced by the server
    /// (`pusher_internal:subscription_count`, sent when the app has subscription counting on);
    /// nil until one arrives on the current connection (cleared when the connection is lost).
    public var subscriptionCount: Int? { client.subscriptionCount(of: name) }
    /// This channel's events, in arrival order.
    public func events() -> AsyncStream<PusherEvent> { client.events(channel: name) }
    /// Calls `callback` for events named `eventName` (all when `nil`) on this channel.
    @discardableResult
    public func bind(eventName: String? = nil, callback: @escaping @Sendable (PusherEvent) -> Void) -> String {
        client.bind(channel: name, eventName: eventName, callback: callback)
    }
    /// Removes a binding.
    public func unbind(_ callbackID: String) { client.unbind(callbackID) }
    /// Removes every binding of this channel.
    public func unbindAll() { client.unbindAll(channel: name) }
    /// Sends a client event on this channel.
    public func trigger(event: String, data: String) throws(PusherError) {
        try client.trigger(channel: name, event: event, data: data)
    }
    /// Unsubscribes.
    public func unsubscribe() { client.unsubscribe(name) }
}

/// A presence channel: a ``PusherChannel`` plus its members.
public struct PresenceChannel: Sendable {
    /// The underlying channel.
    public let channel: PusherChannel

    /// The channel name.
    public var name: String { channel.name }
    /// The current members (replaced on every `subscription_succeeded`).
    public var members: [PusherMember] { channel.client.members(of: channel.name) }
    /// Our own member entry.
    public var me: PusherMember? { channel.client.me(of: channel.name) }
    /// The member with `userID`, if present.
    public func findMember(userID: String) -> PusherMember? { members.first { $0.userID == userID } }
    /// Member list changes of this channel.
    public func presenceChanges() -> AsyncStream<PusherPresenceChange> { channel.client.presenceChanges(channel: name) }
    /// This channel's events.
    public func events() -> AsyncStream<PusherEvent> { channel.events() }
}
