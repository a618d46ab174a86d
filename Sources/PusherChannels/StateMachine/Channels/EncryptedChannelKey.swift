/// The key of one `private-encrypted-` channel and its refetch (docs/pusher-protocol.md §1 "Encrypted
/// channels").
///
/// The key comes with the subscription's auth (`shared_secret`). When an event does not decrypt
/// the server may have rotated the master key: the key is fetched once more (an `.authorize` action
/// for the current socket) and events arriving meanwhile are queued, then decrypted with the new
/// key. If that does not help, events fail with `decryptionFailed` and no further refetch happens
/// until one decrypts again: never a refetch loop.
struct EncryptedChannelKey: Sendable, Equatable {
    /// Where the key refetch stands.
    enum KeyRefetch: Sendable, Equatable {
        /// No refetch: decrypt with the key we have.
        case none
        /// A refetch is under way; these events wait for its key, in arrival order.
        case inFlight(queued: [PusherFrame])
        /// A refetch happened and no event decrypted since: do not refetch again.
        case spent
    }

    /// Most encrypted events held while a channel's key is refetched.
    static let maxQueuedWhileRefetching = 1000

    /// The channel's key, once its auth came.
    private(set) var key: [UInt8]?
    /// Where the key refetch stands.
    private(set) var refetch: KeyRefetch = .none

    /// Whether a refetch is under way.
    var isRefetching: Bool {
        if case .inFlight = refetch { return true }
        return false
    }

    /// A subscription's auth brought `sharedSecret`: the channel's key from now on.
    mutating func subscriptionAuthorized(sharedSecret: [UInt8]) {
        key = sharedSecret
        refetch = .none
    }

    /// An application event arrived on `channel` of connection `socketID`.
    mutating func received(_ frame: PusherFrame, channel: String, socketID: String) -> [PusherConnectionStateMachine.Action] {
        if case .inFlight(var queued) = refetch {
            guard queued.count < Self.maxQueuedWhileRefetching else {
                return [.error(.decryptionFailed(channel: channel, event: frame.event))]
            }
            queued.append(frame)
            refetch = .inFlight(queued: queued)
            return []
        }
        if let plaintext = decrypt(frame) {
            refetch = .none
            return [.deliver(PusherEvent(name: frame.event, channel: channel, data: plaintext, userID: frame.userID))]
        }
        if case .spent = refetch {
            return [.error(.decryptionFailed(channel: channel, event: frame.event))]
        }
        // One key refetch per failure streak: the server may have rotated the master key.
        refetch = .inFlight(queued: [frame])
        return [.authorize(channel: channel, socketID: socketID)]
    }

    /// The refetch brought an auth with `sharedSecret` (`nil`: keep the old key). The queued
    /// events are decrypted with it.
    mutating func refetchSucceeded(sharedSecret: [UInt8]?, channel: String) -> [PusherConnectionStateMachine.Action] {
        guard case .inFlight(let queued) = refetch else { return [] }
        key = sharedSecret ?? key
        refetch = .spent
        var actions: [PusherConnectionStateMachine.Action] = []
        for frame in queued {
            if let plaintext = decrypt(frame) {
                refetch = .none
                actions.append(.deliver(PusherEvent(name: frame.event, channel: channel, data: plaintext, userID: frame.userID)))
            } else {
                actions.append(.error(.decryptionFailed(channel: channel, event: frame.event)))
            }
        }
        return actions
    }

    /// The refetch failed: every queued event fails.
    mutating func refetchFailed(channel: String) -> [PusherConnectionStateMachine.Action] {
        guard case .inFlight(let queued) = refetch else { return [] }
        refetch = .spent
        return queued.map { .error(.decryptionFailed(channel: channel, event: $0.event)) }
    }

    /// The connection ended: a refetch under way was for the old socket and will be dropped.
    mutating func connectionLost() {
        if case .inFlight = refetch { refetch = .none }
    }

    private func decrypt(_ frame: PusherFrame) -> String? {
        guard let key, let data = frame.data else { return nil }
        return SecretBox.openEventData(data, key: key)
    }
}
