import Locking
import PusherChannels

/// The bridge's Pusher clients, one per connection (`[bridge.pusher] connections`), and its HTTP
/// API client. A reload that changes `[bridge.pusher]` replaces them in place, one connection at a
/// time (BridgeRuntime+PusherReplacement.swift): each connection's runner ends its client and
/// runs the replacement queued here.
///
/// The state lives under the runtime's one lock (``RuntimeDecisions/pusherSlots``); the clients
/// are called outside it. A change of a slot bumps a generation, so that subscribing or leaving a
/// channel on every client, which reads the list and then calls each client, goes over the list
/// again when a replacement happened meanwhile: no channel is missed or kept on the new client.
struct PusherSlotsState: Sendable {
    var clients: [PusherClient]
    var rest: PusherHTTPClient?
    /// Bumped when a slot's client changes and when its channels have been copied to the new one.
    var generation: UInt64 = 0
    /// Per connection: the client its runner is to run next, and the runner waiting for it.
    var queued: [PusherClient?]
    var runners: [WaiterQueue<PusherClient?>]

    init(clients: [PusherClient], rest: PusherHTTPClient?) {
        self.clients = clients
        self.rest = rest
        queued = Array(repeating: nil, count: clients.count)
        runners = Array(repeating: WaiterQueue(), count: clients.count)
    }
}

/// ``PusherSlotsState`` under the runtime's lock, and what is done with the clients outside it.
struct PusherSlots: Sendable {
    let decisions: Locked<RuntimeDecisions>
    /// How many connections (fixed for the runtime's life: a change of `connections` restarts the bridge).
    let count: Int

    /// The clients now, by connection.
    var clients: [PusherClient] { decisions.withLock { $0.pusherSlots.clients } }

    /// The HTTP API client now (nil without `app_id` and `secret`).
    var rest: PusherHTTPClient? { decisions.withLock { $0.pusherSlots.rest } }

    /// Calls `body` with every client, again with the new list if a slot changed meanwhile
    /// (`body` must be idempotent: subscribing or leaving a channel is).
    func forEachClient(_ body: (PusherClient) -> Void) {
        var (clients, generation) = decisions.withLock { ($0.pusherSlots.clients, $0.pusherSlots.generation) }
        while true {
            for client in clients { body(client) }
            let now = decisions.withLock { ($0.pusherSlots.clients, $0.pusherSlots.generation) }
            if now.1 == generation { return }
            (clients, generation) = now
        }
    }

    /// Puts `client` in connection `slot`'s place: it gets every channel the old one has (asked
    /// for, whether Pusher confirmed them or not) and is queued for the slot's runner, which ends
    /// the old one first. Returns the channels.
    func replace(_ slot: Int, with client: PusherClient) -> [String] {
        let old = decisions.withLock { state in
            defer {
                state.pusherSlots.clients[slot] = client
                state.pusherSlots.generation &+= 1
            }
            return state.pusherSlots.clients[slot]
        }
        let channels = old.channelNames
        for channel in channels { _ = client.subscribe(channel) }
        let wake = decisions.withLock { state in
            state.pusherSlots.generation &+= 1  // a leave that raced the copy goes over the list again
            guard !state.pusherSlots.runners[slot].isEmpty else {
                state.pusherSlots.queued[slot] = client  // the runner takes it when it looks next
                return WakeUp<PusherClient?>()
            }
            return state.pusherSlots.runners[slot].resumeFirst(returning: client)
        }
        wake.resume()
        return channels
    }

    /// Swaps the HTTP API client (requests already under way finish on the old one).
    func replaceREST(_ rest: PusherHTTPClient?) {
        decisions.withLock { $0.pusherSlots.rest = rest }
    }

    /// The next client for connection `slot`'s runner; nil when the runner's task is cancelled (the
    /// bridge stops).
    func nextReplacement(_ slot: Int) async -> PusherClient? {
        await decisions.wait(
            in: { state, body in body(&state.pusherSlots.runners[slot]) },
            until: { state -> PusherClient?? in
                // `.none` parks; a queued client is `.some(.some(client))` (nil is the cancelled runner's).
                guard let next = state.pusherSlots.queued[slot] else { return .none }
                state.pusherSlots.queued[slot] = nil
                return .some(next)
            },
            ifCancelled: { _ in nil })
    }
}
