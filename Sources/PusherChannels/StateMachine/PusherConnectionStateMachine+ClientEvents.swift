import PusherProtocol

extension PusherConnectionStateMachine {
    // MARK: client events

    /// The application wants to send client event `event` on `channel` (docs/pusher-protocol.md §1
    /// "Client events": `client-*`, private/presence only, after subscription, ≤ 10 per second).
    public mutating func clientEventRequested(
        channel: String,
        event: String,
        data: String,
        now: ContinuousClock.Instant
    ) throws(PusherError) -> Action {
        guard EventName.isClientEvent(event) else {
            throw .clientEventRejected(channel: channel, message: "client event names must start with 'client-'")
        }
        guard event.utf8.count <= PusherLimits.eventNameLength else {
            throw .clientEventRejected(channel: channel, message: "event name is longer than \(PusherLimits.eventNameLength)")
        }
        guard data.utf8.count <= PusherLimits.eventDataBytes else {
            throw .clientEventRejected(channel: channel, message: "data is larger than \(PusherLimits.eventDataBytes) bytes")
        }
        guard ChannelName(channel).kind.allowsClientEvents else {
            throw .clientEventRejected(channel: channel, message: "client events are only allowed on private and presence channels")
        }
        guard socketID != nil, isSubscribed(channel) else {
            throw .notConnected("client events need a subscribed channel", channel: channel)
        }
        guard clientEvents.admit(now: now) else {
            throw .clientEventRejected(
                channel: channel,
                message: "more than \(clientEvents.limit) client events per second",
                code: 4301
            )
        }
        return .send(ClientFrame.clientEvent(channel: channel, event: event, data: data))
    }
}
