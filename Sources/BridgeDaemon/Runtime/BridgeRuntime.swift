import Backoff
import BridgeCore
import Durability
import Locking
import Logging
import MosquittoClient
import PusherChannels
import PusherProtocol

#if canImport(Glibc)
import Glibc
#endif

/// What the daemon shows of a bridge: both connections and the buffers (STATUS=, `/readyz`).
struct BridgeStatus: Sendable, Equatable {
    var pusherState = "connecting"
    var mqttState = "connecting"
    var pusherConnected = false
    var mqttConnected = false
    var buffered = 0
}

/// One bridge at work (DESIGN §5): a Pusher client and an MQTT client wired through the rule table,
/// with an outbox (buffer + spool) per direction, the presence mirrors, loop prevention and the
/// status topic.
///
/// Tasks, all children of ``run()``:
/// - the Pusher consumer: events → rule table → Pusher→MQTT outbox; presence → mirrors;
/// - the MQTT consumer: messages → loop guard / duplicate filter → rule table → MQTT→Pusher outbox;
///   retained `T/members/+` → mirrors;
/// - the MQTT sender: outbox → publishes in flight (window bounded by the MQTT client) and their
///   acknowledgements → spool acknowledgements;
/// - the Pusher senders: outbox → lanes by channel (order per channel) → `batch_events` of up to 10,
///   retried with backoff on network errors, 5xx and 429, dead-lettered on other 4xx;
/// - connection watchers, the spool syncer and a heartbeat for the systemd watchdog.
final class BridgeRuntime: Sendable {
    let name: String
    private let daemon: DaemonSettings
    private let metrics: BridgeMetrics
    private let logger: Logger
    private let pusher: PusherClient
    private let rest: PusherHTTPClient?
    private let mqtt: MQTTClient
    private let toMQTT: Outbox<OutgoingMQTT>
    private let toPusher: Outbox<OutgoingPusher>
    private let shared: Locked<Shared>
    private let stopSignal = AsyncStream.makeStream(of: Void.self)
    private let finished = AsyncStream.makeStream(of: Void.self)
    /// Lanes for MQTT → Pusher delivery; a channel always maps to the same lane.
    static let laneCount = 8

    /// State shared by the runtime's tasks.
    private struct Shared: ~Copyable {
        var settings: BridgeSettings
        var rules: RuleTable
        var mirrors: [String: PresenceMirror]
        var status = BridgeStatus()
        var loopGuard = LoopGuard<ContinuousClock.Instant>(window: .seconds(10), capacity: 10_000)
        var duplicates = DuplicateFilter<ContinuousClock.Instant>(window: .seconds(30), capacity: 10_000)
        /// Until when incoming MQTT messages are checked against `duplicates` (QoS 1 redelivery
        /// after a session resumes): at most 5 s, and only until the first message that is not a
        /// redelivery (the broker resends unacknowledged messages before anything new).
        var duplicateCheckUntil: ContinuousClock.Instant?
        var inFlight: [MQTTPublishID: OutboxEntry<OutgoingMQTT>] = [:]
        /// Completions that arrived before `send` returned their id (QoS 0 completes on write).
        var earlyCompletions: [MQTTPublishID: MQTTPublishCompletion] = [:]
        var lastHeartbeat = ContinuousClock.now
        var pusherConnectedOnce = false
        var mqttConnectedOnce = false
        var stopping = false
        var deadLetterLog = RateLimitedLog(perMinute: 20)
        var dropLog = RateLimitedLog(perMinute: 20)
    }

    init(settings: BridgeSettings, daemon: DaemonSettings, metrics: BridgeMetrics, logger: Logger) throws {
        name = settings.name
        self.daemon = daemon
        self.metrics = metrics
        self.logger = logger
        pusher = PusherClient(options: try Self.pusherOptions(settings), logger: logger)
        rest = try Self.restClient(settings, logger: logger)
        mqtt = try MQTTClient(configuration: Self.mqttConfiguration(settings), logger: logger)
        let limits = BufferLimits(maxMessages: settings.buffer.maxMessages, maxBytes: settings.buffer.maxBytes)
        func spool(_ direction: String) -> String? {
            settings.buffer.persist ? Spool.directory(stateDirectory: daemon.stateDirectory, bridge: settings.name, direction: direction) : nil
        }
        toMQTT = try Outbox(name: "pusher_to_mqtt", limits: limits, overflow: settings.buffer.overflow, spoolDirectory: spool("pusher_to_mqtt"), logger: logger)
        toPusher = try Outbox(name: "mqtt_to_pusher", limits: limits, overflow: settings.buffer.overflow, spoolDirectory: spool("mqtt_to_pusher"), logger: logger)
        var mirrors: [String: PresenceMirror] = [:]
        for rule in settings.presence {
            mirrors[rule.channel] = PresenceMirror(rule: rule, ownUserID: settings.ownPresenceUserID)
        }
        shared = Locked(Shared(settings: settings, rules: RuleTable(bridge: settings), mirrors: mirrors))
    }

    // MARK: Status

    var status: BridgeStatus {
        var status = shared.withLock { $0.status }
        status.buffered = toMQTT.pending + toPusher.pending
        return status
    }

    /// Whether the heartbeat task ran within `interval` (the systemd watchdog's liveness check).
    func isResponsive(within interval: Duration) -> Bool {
        let last = shared.withLock { $0.lastHeartbeat }
        return ContinuousClock.now - last <= interval
    }

    // MARK: Lifecycle

    /// Runs the bridge until ``stop(grace:)`` completes.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.pusher.runUntilCancelled(logger: self.logger) }
            group.addTask { await self.mqtt.run() }
            group.addTask { await self.consumePusher() }
            group.addTask { await self.consumeMQTT() }
            group.addTask { await self.watchMQTTStates() }
            group.addTask { await self.sendToMQTT() }
            group.addTask { await self.collectMQTTCompletions() }
            group.addTask { await self.sendToPusher() }
            group.addTask { await self.housekeeping() }
            await subscribeAll()
            pusher.connect()
            for await _ in finished.stream { break }
            group.cancelAll()
        }
        // Every task has ended: no acknowledgement can come any more. What is pending stays on disk.
        await toMQTT.sync()
        await toPusher.sync()
        await toMQTT.closeSpool()
        await toPusher.closeSpool()
        logger.info("bridge stopped")
    }

    /// Stops taking Pusher input, drains both outboxes for up to `grace`, publishes `offline` on the
    /// status topic, disconnects, and keeps what was not delivered in the spool (DESIGN §3).
    func stop(grace: Duration) async {
        let first = shared.withLock { shared in
            defer { shared.stopping = true }
            return !shared.stopping
        }
        guard first else { return }
        let deadline = ContinuousClock.now + grace
        pusher.disconnect()
        toMQTT.close()
        // Drain what is buffered while the MQTT connection and the HTTP API are still there.
        while ContinuousClock.now < deadline, toMQTT.pending + toPusher.pending > 0 {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let (statusTopic, qos) = shared.withLock { ($0.settings.mqtt.statusTopic, 1) }
        do {
            try await withDeadline(deadline) {
                try await self.mqtt.publish(MQTTMessage(topic: statusTopic, payload: Array("offline".utf8), qos: MQTTQoS(rawValue: qos) ?? .atLeastOnce, retain: true))
            }
        } catch {
            logger.warning("could not publish offline status", metadata: ["error": "\(error)"])
        }
        await mqtt.shutdown()
        toPusher.close()
        while ContinuousClock.now < deadline, toPusher.pending > 0 {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let left = toMQTT.pending + toPusher.pending
        if left > 0 {
            logger.notice("stopped with undelivered messages", metadata: ["messages": "\(left)", "spooled": "\(shared.withLock { $0.settings.buffer.persist })"])
        }
        finished.continuation.yield()
        finished.continuation.finish()
    }

    /// Replaces rules and presence mirrors without touching the connections (SIGHUP with only
    /// `[[bridge.rule]]` / `[[bridge.presence]]` changes).
    func applyRules(_ settings: BridgeSettings) async {
        let (oldChannels, oldSubscriptions, retired) = shared.withLock { shared -> ([String], [BridgeCore.MQTTSubscription], [PresenceMirror.Action]) in
            let channels = shared.settings.pusherChannels
            let subscriptions = shared.settings.mqttSubscriptions
            var retiredActions: [PresenceMirror.Action] = []
            var mirrors: [String: PresenceMirror] = [:]
            for rule in settings.presence {
                if let existing = shared.mirrors.removeValue(forKey: rule.channel), existing.rule == rule {
                    mirrors[rule.channel] = existing
                } else {
                    mirrors[rule.channel] = PresenceMirror(rule: rule, ownUserID: settings.ownPresenceUserID)
                }
            }
            for (_, var removed) in shared.mirrors { retiredActions += removed.retire() }
            shared.mirrors = mirrors
            shared.settings = settings
            shared.rules = RuleTable(bridge: settings)
            return (channels, subscriptions, retiredActions)
        }
        perform(retired, rule: "presence")
        let newChannels = Set(settings.pusherChannels)
        for channel in oldChannels where !newChannels.contains(channel) { pusher.unsubscribe(channel) }
        let newFilters = Set(settings.mqttSubscriptions.map(\.filter))
        for subscription in oldSubscriptions where !newFilters.contains(subscription.filter) {
            do { try await mqtt.unsubscribe(subscription.filter) } catch {
                logger.warning("unsubscribe failed", metadata: ["mqtt.topic": "\(subscription.filter)", "error": "\(error)"])
            }
        }
        await subscribeAll()
    }

    /// Subscribes every channel and MQTT filter the settings name (idempotent).
    private func subscribeAll() async {
        let settings = shared.withLock { $0.settings }
        let known = Set(pusher.channelNames)
        for channel in settings.pusherChannels where !known.contains(channel) {
            _ = pusher.subscribe(channel)
        }
        for subscription in settings.mqttSubscriptions {
            let wire = MosquittoClient.MQTTSubscription(
                subscription.filter,
                qos: MQTTQoS(rawValue: subscription.qos) ?? .atLeastOnce,
                noLocal: settings.mqtt.protocolVersion == .v5 && subscription.noLocal,
                retainAsPublished: false,
                retainHandling: settings.mqtt.protocolVersion == .v5 && subscription.retainHandling == .doNotSend ? .never : .sendAlways
            )
            Task {
                do { _ = try await mqtt.subscribe(wire) } catch {
                    self.metrics.errors(bridge: self.name, kind: "subscribe").increment()
                    self.logger.error("MQTT subscribe failed", metadata: ["mqtt.topic": "\(wire.filter)", "error": "\(error)"])
                }
            }
        }
    }

    // MARK: Pusher → MQTT

    private func consumePusher() async {
        for await update in pusher.updates() {
            if Task.isCancelled { break }
            switch update {
            case .event(let event):
                handle(event)
            case .presence(let change):
                handle(change)
            case .subscriptionSucceeded(let channel):
                logger.debug("subscribed", metadata: ["pusher.channel": "\(channel)"])
            case .subscriptionFailed(let channel, let error):
                metrics.errors(bridge: name, kind: "subscription").increment()
                logger.error("subscription failed", metadata: ["pusher.channel": "\(channel)", "error": "\(error)"])
            case .connectionStateChanged(let change):
                handle(change)
            case .error(let error):
                metrics.errors(bridge: name, kind: "pusher").increment()
                logger.warning("pusher error", metadata: ["error": "\(error)"])
            }
        }
    }

    private func handle(_ event: PusherEvent) {
        guard let channel = event.channel, !event.isProtocolEvent else { return }
        let now = UTCTimestamp.now()
        let (routing, stopping) = shared.withLock { shared in
            (shared.rules.route(channel: channel, event: event.name, data: event.data ?? "", userID: event.userID, receivedAt: now), shared.stopping)
        }
        if stopping { return }
        if routing.isUnmatched {
            metrics.messages(bridge: name, rule: "", direction: .pusherToMQTT, outcome: .unmatched).increment()
            return
        }
        for publish in routing.publishes {
            enqueueToMQTT(publish, receivedAt: now.millisecondsSince1970)
        }
        for letter in routing.deadLetters { deadLetter(letter, direction: .pusherToMQTT) }
    }

    private func handle(_ change: PusherPresenceChange) {
        let actions: [PresenceMirror.Action] = shared.withLock { shared in
            guard var mirror = shared.mirrors[change.channel] else { return [] }
            let actions: [PresenceMirror.Action]
            switch change {
            case .subscriptionSucceeded(_, let members, _):
                actions = mirror.subscriptionSucceeded(members: members.map { PresenceMember(userID: $0.userID, infoJSON: $0.userInfo) })
            case .memberAdded(_, let member):
                actions = mirror.memberAdded(PresenceMember(userID: member.userID, infoJSON: member.userInfo))
            case .memberRemoved(_, let member):
                actions = mirror.memberRemoved(userID: member.userID)
            }
            shared.mirrors[change.channel] = mirror
            return actions
        }
        perform(actions, rule: "presence")
    }

    private func handle(_ change: PusherConnectionStateChange) {
        let connected = change.current == .connected
        let (actions, reconnected): ([PresenceMirror.Action], Bool) = shared.withLock { shared in
            shared.status.pusherState = change.current.rawValue
            shared.status.pusherConnected = connected
            var actions: [PresenceMirror.Action] = []
            var reconnected = false
            if connected {
                reconnected = shared.pusherConnectedOnce
                shared.pusherConnectedOnce = true
            } else if change.previous == .connected {
                for key in shared.mirrors.keys {
                    actions += shared.mirrors[key]!.pusherDisconnected()
                }
            }
            return (actions, reconnected)
        }
        metrics.connectionUp(bridge: name, side: .pusher).record(connected ? 1 : 0)
        if reconnected { metrics.reconnects(bridge: name, side: .pusher).increment() }
        if connected {
            logger.info("pusher connected", metadata: ["pusher.socket_id": "\(change.socketID ?? "")"])
        } else {
            logger.info("pusher \(change.current.rawValue)")
        }
        perform(actions, rule: "presence")
    }

    /// Carries out the presence mirror's commands through the Pusher → MQTT outbox (in order).
    private func perform(_ actions: [PresenceMirror.Action], rule: String) {
        let now = UTCTimestamp.now().millisecondsSince1970
        for action in actions {
            switch action {
            case .publishRetained(let topic, let payload, let qos):
                enqueueToMQTT(MQTTPublish(rule: rule, topic: topic, payload: payload, qos: qos, retain: true), receivedAt: now)
            case .clearRetained(let topic, let qos):
                enqueueToMQTT(MQTTPublish(rule: rule, topic: topic, payload: [], qos: qos, retain: true), receivedAt: now)
            }
        }
    }

    private func enqueueToMQTT(_ publish: MQTTPublish, receivedAt: Int64) {
        let admission = toMQTT.append(OutgoingMQTT(publish: publish, receivedAtMillis: receivedAt))
        account(admission, rule: publish.rule, direction: .pusherToMQTT)
    }

    private func account(_ admission: OutboxAdmission, rule: String, direction: BridgeMetrics.Direction) {
        if admission.dropped > 0 {
            metrics.messages(bridge: name, rule: rule, direction: direction, outcome: .dropped).increment(by: admission.dropped)
            // Rate-limited (DESIGN §5.2): an overloaded bridge drops thousands a second.
            let (log, suppressed) = shared.withLock { $0.dropLog.allow(now: .now) }
            if log {
                logger.warning(
                    "buffer full: message dropped",
                    metadata: ["bridge.rule": "\(rule)", "direction": "\(direction.rawValue)", "dropped": "\(admission.dropped)", "suppressed_logs": "\(suppressed)"])
            }
        }
        if admission.spoolFailed {
            metrics.errors(bridge: name, kind: "spool").increment()
        }
    }

    /// Publishes the outbox to MQTT while connected; acknowledgements arrive on `completions`.
    private func sendToMQTT() async {
        while !Task.isCancelled {
            let batch = await toMQTT.next(max: 256)
            if batch.isEmpty { return }
            for entry in batch {
                let publish = entry.item.publish
                let v5 = shared.withLock { $0.settings.mqtt.protocolVersion == .v5 }
                let message = MQTTMessage(
                    topic: publish.topic, payload: publish.payload, qos: MQTTQoS(rawValue: publish.qos) ?? .atLeastOnce, retain: publish.retain,
                    properties: MQTTPublishProperties(userProperties: v5 ? publish.userProperties.map { .init($0.name, $0.value) } : [])
                )
                if !v5 {
                    shared.withLock { $0.loopGuard.recordPublish(MessageDigest(topic: publish.topic, payload: publish.payload), now: .now) }
                }
                do {
                    let id = try await mqtt.send(message)
                    let early = shared.withLock { shared -> MQTTPublishCompletion? in
                        if let completion = shared.earlyCompletions.removeValue(forKey: id) { return completion }
                        shared.inFlight[id] = entry
                        return nil
                    }
                    if let early { complete(entry, with: early) }
                } catch {
                    // The client is shutting down: the rest stays in the backlog for the next start.
                    return
                }
            }
        }
    }

    private func collectMQTTCompletions() async {
        for await completion in mqtt.completions {
            let entry = shared.withLock { shared -> OutboxEntry<OutgoingMQTT>? in
                if let entry = shared.inFlight.removeValue(forKey: completion.id) { return entry }
                shared.earlyCompletions[completion.id] = completion
                return nil
            }
            if let entry { complete(entry, with: completion) }
        }
    }

    /// The broker acknowledged (or the client gave up on) one publish from the outbox.
    private func complete(_ entry: OutboxEntry<OutgoingMQTT>, with completion: MQTTPublishCompletion) {
        if let error = completion.error {
            metrics.errors(bridge: name, kind: "mqtt_publish").increment()
            logger.warning("MQTT publish failed; kept for the next start", metadata: ["mqtt.topic": "\(entry.item.publish.topic)", "error": "\(error)"])
            return
        }
        toMQTT.acknowledge(entry)
        metrics.messages(bridge: name, rule: entry.item.publish.rule, direction: .pusherToMQTT, outcome: .delivered).increment()
        let now = UTCTimestamp.now().millisecondsSince1970
        metrics.recordDelivery(.milliseconds(max(0, now - entry.item.receivedAtMillis)))
    }

    // MARK: MQTT → Pusher

    /// Takes messages in bursts (up to 64 already received): their events reach the outbox, and
    /// its spool, with one lock and one write.
    private func consumeMQTT() async {
        var events: [OutgoingPusher] = []
        while true {
            let burst = await mqtt.messages.next(max: 64)
            if burst.isEmpty { return }
            for message in burst { handle(message, into: &events) }
            guard !events.isEmpty else { continue }
            let admissions = toPusher.append(contentsOf: events)
            for (admission, event) in zip(admissions, events) {
                account(admission, rule: event.event.rule, direction: .mqttToPusher)
            }
            events.removeAll(keepingCapacity: true)
        }
    }

    private func handle(_ message: MQTTMessage, into events: inout [OutgoingPusher]) {
        let now = ContinuousClock.now
        let digest = MessageDigest(topic: message.topic, payload: message.payload)
        enum Verdict { case echo, duplicate, presence(String), route(RuleTable, Bool) }
        let verdict: Verdict = shared.withLock { shared in
            if shared.settings.mqtt.protocolVersion == .v311, shared.loopGuard.isOwnEcho(digest, now: now) { return .echo }
            if let until = shared.duplicateCheckUntil, message.qos != .atMostOnce {
                if now < until, shared.duplicates.isRedelivery(digest, now: now) { return .duplicate }
                shared.duplicateCheckUntil = nil
            }
            shared.duplicates.record(digest, now: now)
            for rule in shared.settings.presence where message.topic.hasUTF8Prefix(rule.topic + "/members/") {
                return .presence(rule.channel)
            }
            return .route(shared.rules, shared.stopping)
        }
        switch verdict {
        case .echo, .duplicate:
            metrics.messages(bridge: name, rule: "", direction: .mqttToPusher, outcome: .suppressed).increment()
        case .presence(let channel):
            let actions: [PresenceMirror.Action] = shared.withLock { shared in
                guard var mirror = shared.mirrors[channel] else { return [] }
                defer { shared.mirrors[channel] = mirror }
                return mirror.retainedMessageFound(topic: message.topic, payload: message.payload)
            }
            perform(actions, rule: "presence")
        case .route(let rules, _):
            let received = UTCTimestamp.now()
            let routing = rules.route(topic: message.topic, payload: message.payload, qos: message.qos.rawValue, retain: message.retain, receivedAt: received)
            if routing.isUnmatched {
                metrics.messages(bridge: name, rule: "", direction: .mqttToPusher, outcome: .unmatched).increment()
            }
            for skipped in routing.skipped {
                metrics.messages(bridge: name, rule: skipped.rule, direction: .mqttToPusher, outcome: .suppressed).increment()
            }
            for event in routing.events {
                events.append(OutgoingPusher(event: event, receivedAtMillis: received.millisecondsSince1970))
            }
            for letter in routing.deadLetters { deadLetter(letter, direction: .mqttToPusher) }
        }
    }

    /// Hands the outbox to per-channel lanes, each sending batches of up to 10 in order.
    private func sendToPusher() async {
        let lanes = (0..<Self.laneCount).map { _ in LaneQueue<OutboxEntry<OutgoingPusher>>(capacity: 200) }
        await withTaskGroup(of: Void.self) { group in
            for lane in lanes {
                group.addTask { await self.deliver(lane) }
            }
            while !Task.isCancelled {
                let batch = await toPusher.next(max: 100)
                if batch.isEmpty { break }
                for entry in batch {
                    let lane = lanes[Self.lane(for: entry.item.event.channel)]
                    _ = await lane.push(entry)  // false only when stopping: it stays in the backlog
                }
            }
            for lane in lanes { lane.finish() }
        }
    }

    static func lane(for channel: String) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in channel.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash % UInt32(laneCount))
    }

    private func deliver(_ lane: LaneQueue<OutboxEntry<OutgoingPusher>>) async {
        let policy = shared.withLock { $0.settings.reconnect }
        while true {
            let batch = await lane.pop(max: PusherLimits.batchSize)
            if batch.isEmpty { return }
            var attempt = 0
            while true {
                let outcome = await send(batch)
                switch outcome {
                case .delivered:
                    let now = UTCTimestamp.now().millisecondsSince1970
                    for entry in batch {
                        toPusher.acknowledge(entry)
                        metrics.messages(bridge: name, rule: entry.item.event.rule, direction: .mqttToPusher, outcome: .delivered).increment()
                        metrics.recordDelivery(.milliseconds(max(0, now - entry.item.receivedAtMillis)))
                    }
                case .rejected(let status, let body):
                    for entry in batch {
                        toPusher.acknowledge(entry)
                        deadLetter(
                            DeadLetter(
                                rule: entry.item.event.rule, reason: .rejectedByPusher(status: status, body: body),
                                source: .pusher(channel: entry.item.event.channel, event: entry.item.event.event),
                                payload: Array(entry.item.event.data.utf8)
                            ), direction: .mqttToPusher)
                    }
                case .retry(let error):
                    metrics.errors(bridge: name, kind: "pusher_http").increment()
                    if shared.withLock({ $0.stopping }) && lane.isFinished {
                        break  // left in the backlog for the next start
                    }
                    let delay = policy.delay(attempt: attempt)
                    logger.warning("Pusher HTTP API failed; retrying", metadata: ["error": "\(error)", "retry_in": "\(delay)", "events": "\(batch.count)"])
                    attempt += 1
                    try? await Task.sleep(for: delay)
                    if Task.isCancelled { return }
                    continue
                }
                break
            }
        }
    }

    private enum SendOutcome {
        case delivered
        case rejected(status: Int, body: String)
        case retry(String)
    }

    private func send(_ batch: [OutboxEntry<OutgoingPusher>]) async -> SendOutcome {
        let socketID = pusher.socketID
        let httpEvents = batch.filter { $0.item.event.via == .http }
        let clientEvents = batch.filter { $0.item.event.via == .clientEvent }
        if !clientEvents.isEmpty {
            // Client events need our own subscribed connection (PUSHER-PROTOCOL §1, "Client events").
            for entry in clientEvents {
                let event = entry.item.event
                do {
                    try pusher.trigger(channel: event.channel, event: event.event, data: event.data)
                } catch {
                    return .retry("client event on \(event.channel): \(error)")
                }
            }
        }
        guard !httpEvents.isEmpty else { return .delivered }
        guard let rest else { return .rejected(status: 0, body: "no app_id/secret for the HTTP API") }
        let events = httpEvents.map {
            PusherBatchEvent(channel: $0.item.event.channel, name: $0.item.event.event, data: $0.item.event.data, socketID: socketID)
        }
        do {
            _ = try await rest.triggerBatch(events)
            return .delivered
        } catch {
            if error.isRetryable { return .retry(error.description) }
            return .rejected(status: error.status ?? 0, body: error.body ?? error.message)
        }
    }

    // MARK: Dead letters, MQTT states, housekeeping

    private func deadLetter(_ letter: DeadLetter, direction: BridgeMetrics.Direction) {
        metrics.messages(bridge: name, rule: letter.rule, direction: direction, outcome: .deadLettered).increment()
        let (topic, shouldLog, suppressed) = shared.withLock { shared in
            let (log, suppressed) = shared.deadLetterLog.allow(now: .now)
            return (shared.settings.mqtt.deadLetterTopic, log, suppressed)
        }
        if shouldLog {
            logger.warning(
                "message dead-lettered",
                metadata: ["bridge.rule": "\(letter.rule)", "reason": "\(letter.reason)", "source": "\(letter.source)", "suppressed_logs": "\(suppressed)"])
        }
        if let topic {
            enqueueToMQTT(MQTTPublish(rule: letter.rule, topic: topic, payload: letter.jsonPayload, qos: 1, retain: false), receivedAt: UTCTimestamp.now().millisecondsSince1970)
        }
    }

    private func watchMQTTStates() async {
        for await state in mqtt.states {
            let connected: Bool
            var sessionPresent = false
            let description: String
            switch state {
            case .idle: (connected, description) = (false, "idle")
            case .connecting: (connected, description) = (false, "connecting")
            case .connected(let present): (connected, description, sessionPresent) = (true, "connected", present)
            case .disconnected(let error, let retryIn):
                (connected, description) = (false, "disconnected")
                logger.warning("MQTT disconnected", metadata: ["error": "\(error)", "retry_in": "\(retryIn)"])
            case .stopped(let error):
                (connected, description) = (false, "stopped")
                if let error { logger.error("MQTT gave up", metadata: ["error": "\(error)"]) }
            }
            let (reconnected, mirrorActions, statusTopic): (Bool, [PresenceMirror.Action], String) = shared.withLock { shared in
                shared.status.mqttState = description
                shared.status.mqttConnected = connected
                guard connected else { return (false, [], shared.settings.mqtt.statusTopic) }
                let again = shared.mqttConnectedOnce
                shared.mqttConnectedOnce = true
                shared.duplicateCheckUntil = .now + .seconds(5)
                shared.duplicates.startConnection()
                var actions: [PresenceMirror.Action] = []
                for key in shared.mirrors.keys { actions += shared.mirrors[key]!.mqttConnected() }
                return (again, actions, shared.settings.mqtt.statusTopic)
            }
            metrics.connectionUp(bridge: name, side: .mqtt).record(connected ? 1 : 0)
            guard connected else { continue }
            if reconnected { metrics.reconnects(bridge: name, side: .mqtt).increment() }
            logger.info("mqtt connected", metadata: ["mqtt.session_present": "\(sessionPresent)"])
            // Retained "online" (the Last Will says "offline"), outside the outbox: it is state, not data.
            let online = MQTTMessage(topic: statusTopic, payload: Array("online".utf8), qos: .atLeastOnce, retain: true)
            Task { [mqtt, logger] in
                do { try await mqtt.publish(online) } catch { logger.debug("online status not published", metadata: ["error": "\(error)"]) }
            }
            perform(mirrorActions, rule: "presence")
        }
    }

    /// Spool syncs (about once a second), gauges, and the heartbeat the watchdog checks.
    private func housekeeping() async {
        while !Task.isCancelled {
            shared.withLock { $0.lastHeartbeat = .now }
            await toMQTT.sync()
            await toPusher.sync()
            metrics.buffered(bridge: name, direction: .pusherToMQTT).record(toMQTT.pending)
            metrics.buffered(bridge: name, direction: .mqttToPusher).record(toPusher.pending)
            try? await Task.sleep(for: .seconds(1))
        }
    }

    // MARK: Settings → client configurations

    static func pusherOptions(_ settings: BridgeSettings) throws -> PusherClientOptions {
        let p = settings.pusher
        let authorization: PusherAuthorization
        if let endpoint = p.authEndpoint {
            authorization = .endpoint(url: endpoint, headers: p.authHeaders)
        } else if let secret = p.secret {
            authorization = .inline(
                try PusherInlineSigner(
                    key: p.key, secret: secret.value, userID: p.userID, userInfoJSON: p.userInfoJSON,
                    encryptionMasterKeyBase64: p.encryptionMasterKey?.value))
        } else {
            authorization = .none
        }
        return PusherClientOptions(
            key: p.key,
            host: p.cluster.map { .cluster($0) } ?? .host(p.host, port: p.port),
            encrypted: p.useTLS,
            caFile: p.caFile,
            activityTimeout: p.activityTimeout,
            pongTimeout: p.pongTimeout,
            reconnectPolicy: settings.reconnect,
            authorization: authorization
        )
    }

    static func restClient(_ settings: BridgeSettings, logger: Logger) throws -> PusherHTTPClient? {
        let p = settings.pusher
        guard let appID = p.appID, let secret = p.secret else { return nil }
        // Events for private-encrypted- channels are encrypted with the channel's key, derived
        // from the master key (PUSHER-PROTOCOL §1, "Encrypted channels").
        var masterKey: [UInt8]?
        if let base64 = p.encryptionMasterKey?.value {
            masterKey = try PusherInlineSigner(key: p.key, secret: secret.value, encryptionMasterKeyBase64: base64).encryptionMasterKey
        }
        return PusherHTTPClient(
            appID: appID, key: p.key, secret: secret.value,
            host: p.cluster.map { .cluster($0) } ?? .host(p.restHost, port: p.restPort),
            encrypted: p.useTLS, maxEventBytes: p.maxEventBytes, encryptionMasterKey: masterKey, logger: logger
        )
    }

    static func mqttConfiguration(_ settings: BridgeSettings) -> MQTTConfiguration {
        let m = settings.mqtt
        var tls: MQTTTLSConfiguration?
        if m.useTLS {
            tls = MQTTTLSConfiguration(caFile: m.caFile, certificateFile: m.certFile, keyFile: m.keyFile, insecure: m.tlsInsecure)
        }
        return MQTTConfiguration(
            host: m.host, port: m.port, clientID: m.clientID,
            protocolVersion: m.protocolVersion == .v5 ? .v5 : .v311,
            cleanSession: m.cleanSession, sessionExpiry: m.sessionExpiry, keepAlive: m.keepalive,
            username: m.username, password: m.password?.value, tls: tls,
            will: MQTTWill(topic: m.statusTopic, payload: Array("offline".utf8), qos: .atLeastOnce, retain: true),
            reconnect: settings.reconnect,
            // While the consumer is stuck, libmosquitto's thread blocks and sends no PINGREQ: stay
            // well inside the keepalive, or the broker drops us (seen in the issue 7 benchmark
            // with keepalive 5 s against the former fixed 5 s).
            backpressureTimeout: min(.seconds(5), m.keepalive / 2)
        )
    }
}

extension PusherClient {
    /// Runs the connection until the task is cancelled; a failure to run is logged, not thrown.
    func runUntilCancelled(logger: Logger) async {
        do { try await run() } catch is CancellationError {} catch {
            logger.error("pusher client stopped", metadata: ["error": "\(error)"])
        }
    }
}

/// Logs at most `perMinute` lines a minute and counts the rest (DESIGN §5.2: rate-limited logs).
struct RateLimitedLog: Sendable {
    let perMinute: Int
    private var windowStart: ContinuousClock.Instant?
    private var logged = 0
    private var suppressed = 0

    init(perMinute: Int) { self.perMinute = perMinute }

    /// Whether to log now, and how many lines were suppressed since the last one logged.
    mutating func allow(now: ContinuousClock.Instant) -> (Bool, Int) {
        if windowStart.map({ now - $0 >= .seconds(60) }) ?? true {
            windowStart = now
            logged = 0
        }
        guard logged < perMinute else {
            suppressed += 1
            return (false, suppressed)
        }
        logged += 1
        defer { suppressed = 0 }
        return (true, suppressed)
    }
}

/// Runs `body`, giving up with `CancellationError` at `deadline`.
func withDeadline<T: Sendable>(_ deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(until: deadline)
            throw CancellationError()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
