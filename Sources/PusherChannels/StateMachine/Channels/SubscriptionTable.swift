import PusherProtocol

/// The channels the application asked for, in the order it asked, each with its subscription
/// state, its presence roster and its encryption key.
///
/// Every operation on one channel is O(1) (amortised), whatever the number of channels: a bridge
/// holding tens of thousands of discovered channels leaves them one at a time, and an ordered
/// dictionary's removal — O(n), the elements after it shift — made leaving 30,000 channels a
/// stall of minutes (found by `Benchmarks/fleet/bench_fleet_cluster.py`). The records are a plain
/// dictionary; the order is a list of (name, ticket) that removal leaves behind and that is
/// compacted once it holds more stale entries than live ones. A channel asked for again after an
/// unsubscribe gets a new ticket: it goes to the end, as a new request.
///
/// Subscriptions may be requested at any time; after every connect each is (re)sent with fresh
/// auth for the new `socket_id`. A failed subscription stays in the table and is retried after
/// the next connect; only an unsubscribe removes it.
struct SubscriptionTable: Sendable {
    /// Where one channel's subscription stands on the current connection.
    enum SubscriptionState: Sendable, Equatable {
        /// Not sent on this connection yet (or no connection).
        case pending
        /// Waiting for an auth for connection `socketID`.
        case authorizing(socketID: String)
        /// `pusher:subscribe` sent; waiting for the server's answer.
        case subscribing
        /// The server confirmed it.
        case subscribed
        /// The server or the authorizer refused it; retried after the next connect.
        case failed
    }

    /// One channel asked for.
    struct Record: Sendable {
        /// The channel name.
        let name: String
        /// Its kind, from the name's prefix.
        let kind: ChannelKind
        /// Its place in the order of requests (``SubscriptionTable/order``).
        let ticket: UInt64
        /// Where its subscription stands.
        var state: SubscriptionState = .pending
        /// An auth the application obtained itself, for the next subscribe only.
        var providedAuth: PusherChannelAuth?
        /// The `channel_data` of the last subscribe (presence: who we are).
        var channelData: String?
        /// Presence channels: the members.
        var roster = PresenceRoster()
        /// Encrypted channels: the key.
        var key = EncryptedChannelKey()
        /// The last `subscription_count` the server announced on the current connection.
        var subscriptionCount: Int?
    }

    private var records: [String: Record] = [:]
    /// The requests in order; an entry whose ticket is not its channel's record's is stale.
    private var order: [(name: String, ticket: UInt64)] = []
    private var nextTicket: UInt64 = 0

    /// The channels asked for, in order.
    var names: [String] { order.compactMap { records[$0.name]?.ticket == $0.ticket ? $0.name : nil } }

    /// How many channels are asked for.
    var count: Int { records.count }

    /// The length of the order list, stale entries included (for the tests of its bound).
    var orderEntries: Int { order.count }

    /// The record of `channel`, if asked for.
    subscript(channel: String) -> Record? { records[channel] }

    /// Whether `channel` is currently subscribed on the server.
    func isSubscribed(_ channel: String) -> Bool { records[channel]?.state == .subscribed }

    // MARK: application requests

    /// The application asked for `channel`, optionally with an auth it obtained itself; on a
    /// connection (`socketID`) its subscription starts at once. A repeated request changes nothing.
    mutating func subscribeRequested(
        _ channel: String,
        auth: PusherChannelAuth?,
        socketID: String?
    ) -> [PusherConnectionStateMachine.Action] {
        guard records[channel] == nil else { return [] }
        records[channel] = Record(name: channel, kind: ChannelName(channel).kind, ticket: nextTicket, providedAuth: auth)
        order.append((channel, nextTicket))
        nextTicket &+= 1
        guard let socketID else { return [] }
        return startSubscription(channel, socketID: socketID)
    }

    /// The application no longer wants `channel`; the server is told when it knows of the
    /// subscription (`connected`, and subscribing or subscribed).
    mutating func unsubscribeRequested(_ channel: String, connected: Bool) -> [PusherConnectionStateMachine.Action] {
        guard let record = records.removeValue(forKey: channel) else { return [] }
        if order.count > 64, order.count > 2 * records.count {
            order.removeAll { records[$0.name]?.ticket != $0.ticket }
        }
        guard connected else { return [] }
        switch record.state {
        case .subscribing, .subscribed: return [.send(ClientFrame.unsubscribe(channel: channel))]
        case .pending, .authorizing, .failed: return []
        }
    }

    /// Sends, or authorizes and then sends, the subscription of `channel` on connection `socketID`.
    private mutating func startSubscription(_ channel: String, socketID: String) -> [PusherConnectionStateMachine.Action] {
        guard var record = records[channel] else { return [] }
        defer { records[channel] = record }
        guard record.kind.requiresAuth else {
            record.state = .subscribing
            return [.send(ClientFrame.subscribe(channel: channel, auth: nil, channelData: nil))]
        }
        if let provided = record.providedAuth {
            record.providedAuth = nil
            return Self.sendSubscribe(&record, auth: provided)
        }
        record.state = .authorizing(socketID: socketID)
        return [.authorize(channel: channel, socketID: socketID)]
    }

    /// A connection `socketID` was established: every channel is subscribed again, in order.
    mutating func connectionEstablished(socketID: String) -> [PusherConnectionStateMachine.Action] {
        var actions: [PusherConnectionStateMachine.Action] = []
        for name in names { actions += startSubscription(name, socketID: socketID) }
        return actions
    }

    /// The auth asked for `channel` on `socketID` came; `nil` when the channel was not waiting
    /// for it (the caller then offers it to a key refetch).
    mutating func authorizationSucceeded(
        _ channel: String,
        socketID: String,
        auth: PusherChannelAuth
    ) -> [PusherConnectionStateMachine.Action]? {
        guard var record = records[channel], record.state == .authorizing(socketID: socketID) else { return nil }
        defer { records[channel] = record }
        return Self.sendSubscribe(&record, auth: auth)
    }

    /// The auth asked for `channel` on `socketID` failed; `nil` when the channel was not waiting for it.
    mutating func authorizationFailed(
        _ channel: String,
        socketID: String,
        message: String
    ) -> [PusherConnectionStateMachine.Action]? {
        guard var record = records[channel], record.state == .authorizing(socketID: socketID) else { return nil }
        record.state = .failed
        records[channel] = record
        return [.subscriptionFailed(channel: channel, error: .authorizationFailed(channel: channel, message: message))]
    }

    private static func sendSubscribe(_ record: inout Record, auth: PusherChannelAuth) -> [PusherConnectionStateMachine.Action] {
        let channel = record.name
        if record.kind == .presence, auth.channelData == nil {
            record.state = .failed
            return [
                .subscriptionFailed(
                    channel: channel,
                    error: .authorizationFailed(channel: channel, message: "presence auth has no channel_data")
                )
            ]
        }
        if record.kind == .privateEncrypted {
            guard let secret = auth.sharedSecret else {
                record.state = .failed
                return [
                    .subscriptionFailed(
                        channel: channel,
                        error: .authorizationFailed(channel: channel, message: "encrypted channel auth has no shared_secret")
                    )
                ]
            }
            record.key.subscriptionAuthorized(sharedSecret: secret)
        }
        record.channelData = auth.channelData
        record.state = .subscribing
        return [.send(ClientFrame.subscribe(channel: channel, auth: auth.auth, channelData: auth.channelData))]
    }

    // MARK: the server's answers

    /// `pusher_internal:subscription_succeeded` for `channel` with `data` (presence: the members).
    mutating func subscriptionSucceeded(_ channel: String, data: String?) -> [PusherConnectionStateMachine.Action]? {
        guard var record = records[channel] else { return nil }
        record.state = .subscribed
        var actions: [PusherConnectionStateMachine.Action] = [.subscriptionSucceeded(channel: channel)]
        if record.kind == .presence {
            actions += record.roster.subscriptionSucceeded(channel: channel, data: data, channelData: record.channelData)
        }
        records[channel] = record
        return actions
    }

    /// `pusher:subscription_error` for `channel` with `data`.
    mutating func subscriptionError(_ channel: String, data: String?) -> [PusherConnectionStateMachine.Action]? {
        guard records[channel] != nil else { return nil }
        records[channel]?.state = .failed
        return [.subscriptionFailed(channel: channel, error: ProtocolEventData.subscriptionError(channel: channel, data: data))]
    }

    /// A `pusher:error` (`channel`: the frame's channel field) that may be the refusal of a
    /// subscription: failed that subscription, or else reports the error.
    mutating func serverError(_ error: PusherError, channel: String?) -> [PusherConnectionStateMachine.Action] {
        if let culprit = blamedChannel(for: error, channel: channel), records[culprit]?.state == .subscribing {
            records[culprit]?.state = .failed
            return [
                .subscriptionFailed(
                    channel: culprit,
                    error: .subscriptionFailed(channel: culprit, message: error.message, code: error.pusherCode)
                )
            ]
        }
        return [.error(error)]
    }

    /// Whether a subscription is waiting for the server's answer.
    var hasPendingSubscription: Bool { records.values.contains { $0.state == .subscribing } }

    /// Servers report a refused subscription as a plain pusher:error (code null or 4009) without
    /// naming the channel field (docs/pusher-protocol.md §1 "Subscribe"): attribute it when we can.
    func blamedChannel(for error: PusherError, channel: String?) -> String? {
        if let channel, records[channel] != nil { return channel }
        let subscribing = names.filter { records[$0]?.state == .subscribing }
        if let named = subscribing.first(where: { error.message.contains($0) }) { return named }
        if subscribing.count == 1, error.pusherCode == 4009 || error.pusherCode == nil { return subscribing[0] }
        return nil
    }

    /// Runs `body` on the record of `channel` in place (a queue of encrypted events is not
    /// copied per event), if the channel was asked for.
    mutating func updateRecord<Result>(_ channel: String, _ body: (inout Record) -> Result) -> Result? {
        guard let index = records.index(forKey: channel) else { return nil }
        return body(&records.values[index])
    }

    // MARK: connection

    /// After the server forgot our subscriptions: everything must be sent again, with new auth.
    mutating func connectionLost() {
        var index = records.startIndex
        while index != records.endIndex {
            records.values[index].state = .pending
            records.values[index].subscriptionCount = nil
            records.values[index].roster.connectionLost()
            records.values[index].key.connectionLost()
            records.formIndex(after: &index)
        }
    }
}
