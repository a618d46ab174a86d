/// A SUBSCRIBE or UNSUBSCRIBE that has not been acknowledged yet, and who waits for it.
struct PendingRequest<Waiter> {
    /// What to send.
    var request: MQTTRequest
    /// `nil` for resubscriptions the client makes by itself after a reconnect.
    var waiter: Waiter?
}

extension PendingRequest: Sendable where Waiter: Sendable {}
extension PendingRequest: Equatable where Waiter: Equatable {}
