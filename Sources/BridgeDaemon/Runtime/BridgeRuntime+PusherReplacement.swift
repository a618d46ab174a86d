import BridgeCore
import Logging
import PusherChannels

/// A reload that changes `[bridge.pusher]` (but not the connection count or the HTTP lanes) keeps
/// the bridge running and replaces its Pusher side in place, one connection at a time
/// (docs/contract.md §8.1, "staggered reconnects"): the MQTT connection, the spools, the rules and
/// what is in flight stay. With two or more connections nothing is lost: a connection is replaced
/// only while every other one is up and holds its channels, and the next waits until the new one
/// holds them too. With one connection the replacement leaves a gap, reported like any other.
extension BridgeRuntime {
    /// How long a replacement waits for the other connections to hold their channels, and for the
    /// new connection to hold them.
    static let replacementWait: Duration = .seconds(30)

    /// The clients now, by connection.
    var pushers: [PusherClient] { pusherSlots.clients }

    /// The HTTP API client now (nil without `app_id` and `secret`).
    var rest: PusherHTTPClient? { pusherSlots.rest }

    /// A connection's logger: tagged `pusher.connection` when there are several.
    static func connectionLogger(_ logger: Logger, _ connection: Int, of count: Int) -> Logger {
        var connectionLogger = logger
        if count > 1 { connectionLogger[metadataKey: "pusher.connection"] = "\(connection)" }
        return connectionLogger
    }

    /// Connection `slot`'s runner: runs its client and its consumer until a replacement is queued,
    /// then ends the old client (its connection down, as for any drop) and runs the new one; until
    /// the bridge stops.
    func runPusherConnection(_ slot: Int) async {
        var client = pusherSlots.clients[slot]
        var replacing = false
        while true {
            let current = client
            let next: PusherClient? = await withTaskGroup(of: Bool.self) { group in
                let batches = current.updateBatches()
                group.addTask {
                    await current.runUntilCancelled(logger: self.logger)
                    return false
                }
                group.addTask {
                    await self.consumePusher(batches, connection: slot)
                    return true
                }
                if replacing { current.connect() }
                let next = await pusherSlots.nextReplacement(slot)
                if next != nil {
                    // Closed, then what it had received taken in before the consumer ends: events
                    // only this connection had are not dropped (found by the fault row: 16 lost).
                    await current.disconnectAndWait()
                    batches.finish()
                    while let consumerEnded = await group.next(), !consumerEnded {}
                }
                group.cancelAll()
                return next
            }
            guard let next else { return }
            // Whether or not its consumer saw it go: the connection is down until the new client's is up.
            // Under `pusherInbound`, like a consumer's report: held events this releases reach the
            // outbox in the order the merge released them, not after another consumer's next batch.
            pusherInbound.withLock { _ in
                if decisions.withLock({ $0.pusherConnections.coverage.connectionUp[slot] }) {
                    pusherConnectionChanged(PusherConnectionStateChange(previous: .connected, current: .disconnected), connection: slot)
                }
            }
            client = next
            replacing = true
        }
    }

    /// Replaces the Pusher side with `settings`' (its WebSocket connections one at a time, those
    /// down first; the HTTP API client once the first new connection holds its channels). A
    /// connection that is up is replaced only once every other one is up and holds its channels.
    /// Returns when done, or when that or a new connection's coming up did not happen within
    /// ``replacementWait``: the connections not yet replaced keep the previous settings (logged,
    /// `errors_total{kind="reload"}`), and the next reload tries again.
    func replacePusherSide(with settings: BridgeSettings) async {
        let options: PusherClientOptions
        let rest: PusherHTTPClient?
        do {
            options = try ClientSettings.pusherOptions(settings)
            rest = try ClientSettings.restClient(settings, logger: logger)
        } catch {
            metrics.errors(bridge: name, kind: "reload").increment()
            logger.error("pusher settings not applied: the connections keep the previous ones", metadata: ["error": "\(error)"])
            return
        }
        // Connections that are down first: replacing them loses nothing.
        let up = decisions.withLock { $0.pusherConnections.coverage.connectionUp }
        var restReplaced = false
        for slot in up.indices.sorted(by: { !up[$0] && up[$1] }) {
            // Never drop a connection on purpose while another is down.
            if up[slot] {
                for other in 0..<pusherSlots.count where other != slot {
                    let channels = pusherSlots.clients[other].channelNames
                    guard await waitUntil(connection: other, holdsAll: channels, notOn: nil) else {
                        metrics.errors(bridge: name, kind: "reload").increment()
                        logger.error(
                            "pusher connection not replaced while another is down; it keeps the previous settings",
                            metadata: ["down": "\(other)", "waited": "\(Self.replacementWait)"].merging(tag(slot)) { $1 })
                        return
                    }
                }
            }
            let started = ContinuousClock.now
            let client = Self.makePusherClient(options: options, logger: Self.connectionLogger(logger, slot, of: pusherSlots.count))
            // The old client's connection, until the runner has ended it: not the one to wait for.
            let old = decisions.withLock { $0.pusherConnections.socketIDs[slot] }
            let channels = pusherSlots.replace(slot, with: client)
            guard await waitUntil(connection: slot, holdsAll: channels, notOn: old) else {
                metrics.errors(bridge: name, kind: "reload").increment()
                logger.error(
                    "pusher connection not up with the new settings; the connections not yet replaced keep the previous ones",
                    metadata: ["waited": "\(Self.replacementWait)"].merging(tag(slot)) { $1 })
                return
            }
            if !restReplaced {
                // The new settings reach Pusher: the HTTP API takes them too.
                pusherSlots.replaceREST(rest)
                restReplaced = true
            }
            logger.info(
                "pusher connection replaced",
                metadata: ["channels": "\(channels.count)", "took": "\(ContinuousClock.now - started)"].merging(tag(slot)) { $1 })
        }
    }

    /// Waits until connection `connection` is up, on a socket other than `old`, and holds
    /// `channels` (those the bridge still holds, ``ChannelCoverage/connection(_:holdsAll:)``);
    /// false after ``replacementWait``, or when the bridge stops.
    private func waitUntil(connection: Int, holdsAll channels: [String], notOn old: String?) async -> Bool {
        let deadline = ContinuousClock.now + Self.replacementWait
        @Sendable func done(_ state: RuntimeDecisions) -> Bool {
            let socket = state.pusherConnections.socketIDs[connection]
            return socket != nil && (old == nil || socket != old)
                && state.pusherConnections.coverage.connection(connection, holdsAll: channels)
        }
        while ContinuousClock.now < deadline, !Task.isCancelled {
            // Woken by every change of a connection or a subscription, or at the deadline: looks again.
            await decisions.wait(
                in: { state, body in body(&state.coverageWaiters) }, deadline: deadline, until: { done($0) ? () : nil },
                ifTimedOut: { _ in () }, ifCancelled: { _ in () })
            if decisions.withLock({ done($0) }) { return true }
        }
        return false
    }
}
