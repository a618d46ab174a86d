import Testing

@testable import PusherLocal

/// The pure webhook queue: batching by size and time, one request in flight, retries with
/// exponential backoff until the limit, order kept (manual clock, no sleeping).
struct WebhookBatcherTests {
    let t0 = ContinuousClock.now

    func event(_ n: Int) -> WebhookEvent { WebhookEvent(name: "channel_occupied", channel: "c\(n)") }

    func posted(_ actions: [WebhookBatcher.Action]) -> [[String]] {
        actions.compactMap { if case .post(let events) = $0 { events.map(\.channel) } else { nil } }
    }

    @Test func anEventWaitsForCompanionsUntilTheBatchDelay() {
        var batcher = WebhookBatcher()
        #expect(batcher.eventQueued(event(1), now: t0).isEmpty)
        #expect(batcher.eventQueued(event(2), now: t0 + .milliseconds(100)).isEmpty)
        #expect(batcher.nextDeadline == t0 + .milliseconds(250))
        #expect(batcher.timerFired(now: t0 + .milliseconds(249)).isEmpty)
        #expect(posted(batcher.timerFired(now: t0 + .milliseconds(250))) == [["c1", "c2"]])
        #expect(batcher.nextDeadline == nil)  // in flight
        #expect(batcher.postSucceeded(now: t0 + .milliseconds(260)).isEmpty)
        #expect(batcher.isIdle)
        #expect(batcher.counters.posted == 1)
        #expect(batcher.counters.eventsPosted == 2)
    }

    @Test func aFullBatchGoesOutAtOnceAndTheRestWaitsBehindIt() {
        var batcher = WebhookBatcher(settings: WebhookSettings(batchSize: 3))
        var actions: [WebhookBatcher.Action] = []
        for n in 1...7 { actions += batcher.eventQueued(event(n), now: t0) }
        #expect(posted(actions) == [["c1", "c2", "c3"]])  // one in flight; 4...7 wait
        #expect(batcher.backlog == 7)
        #expect(posted(batcher.postSucceeded(now: t0 + .milliseconds(5))) == [["c4", "c5", "c6"]])
        // c7 is not yet due: its batch delay runs from when it was queued.
        #expect(posted(batcher.postSucceeded(now: t0 + .milliseconds(10))).isEmpty)
        #expect(batcher.nextDeadline == t0 + .milliseconds(250))
        #expect(posted(batcher.timerFired(now: t0 + .milliseconds(250))) == [["c7"]])
    }

    @Test func failedRequestsAreRetriedWithDoublingDelaysInOrder() throws {
        var batcher = WebhookBatcher(settings: WebhookSettings(batchDelay: .zero))
        #expect(posted(batcher.eventQueued(event(1), now: t0)) == [["c1"]])
        #expect(batcher.eventQueued(event(2), now: t0).isEmpty)  // waits behind c1
        var now = t0
        var waits: [Duration] = []
        for _ in 0..<8 {
            #expect(batcher.postFailed(now: now).isEmpty)
            let retryAt = try #require(batcher.nextDeadline)
            waits.append(retryAt - now)
            #expect(batcher.timerFired(now: retryAt - .milliseconds(1)).isEmpty)
            now = retryAt
            #expect(posted(batcher.timerFired(now: now)) == [["c1"]])
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60].map { Duration.seconds($0) })
        #expect(posted(batcher.postSucceeded(now: now)) == [["c2"]])
        #expect(batcher.counters.failed == 8)
        #expect(batcher.counters.retried == 8)
        #expect(batcher.counters.givenUp == 0)
    }

    @Test func aRequestIsGivenUpOnceItsNextRetryWouldPassTheLimit() throws {
        let settings = WebhookSettings(batchDelay: .zero, retryInitial: .seconds(1), retryCap: .seconds(60), retryLimit: .seconds(300))
        var batcher = WebhookBatcher(settings: settings)
        _ = batcher.eventQueued(event(1), now: t0)
        _ = batcher.eventQueued(event(2), now: t0)
        var now = t0
        var attempts = 1
        var actions: [WebhookBatcher.Action] = []
        while true {
            actions = batcher.postFailed(now: now)
            if !actions.isEmpty { break }
            now = try #require(batcher.nextDeadline)
            _ = batcher.timerFired(now: now)
            attempts += 1
        }
        // 1+2+4+8+16+32+60+60+60 = 243 s of waits; the next (60 s) would start at 303 s > 300 s.
        #expect(attempts == 10)
        #expect(now - t0 == .seconds(243))
        #expect(actions.first == .gaveUp([event(1)], attempts: 10))
        #expect(posted(actions) == [["c2"]])  // the next request goes out at once
        #expect(batcher.counters.givenUp == 1)
        #expect(batcher.counters.eventsGivenUp == 1)
    }

    @Test func aZeroRetryLimitNeverRetries() {
        var batcher = WebhookBatcher(settings: WebhookSettings(batchDelay: .zero, retryLimit: .zero))
        _ = batcher.eventQueued(event(1), now: t0)
        #expect(batcher.postFailed(now: t0) == [.gaveUp([event(1)], attempts: 1)])
        #expect(batcher.isIdle)
    }

    @Test func drainingPostsAtOnceAndStopsRetrying() {
        var batcher = WebhookBatcher()
        _ = batcher.eventQueued(event(1), now: t0)
        #expect(posted(batcher.drain(now: t0)) == [["c1"]])
        #expect(batcher.postFailed(now: t0) == [.gaveUp([event(1)], attempts: 1)])
        #expect(batcher.isIdle)
    }

    @Test func aFullQueueDropsNewEvents() {
        var batcher = WebhookBatcher(settings: WebhookSettings(batchSize: 1, batchDelay: .zero, maxQueuedEvents: 2))
        _ = batcher.eventQueued(event(1), now: t0)
        _ = batcher.eventQueued(event(2), now: t0)
        #expect(batcher.eventQueued(event(3), now: t0) == [.dropped(1)])
        #expect(batcher.counters.eventsDropped == 1)
    }

    @Test func outcomesWithoutARequestInFlightChangeNothing() {
        var batcher = WebhookBatcher()
        #expect(batcher.postSucceeded(now: t0).isEmpty)
        #expect(batcher.postFailed(now: t0).isEmpty)
        #expect(batcher.counters == WebhookCounters())
    }

    @Test func badSettingsAreNamed() {
        #expect(WebhookSettings().problems.isEmpty)
        #expect(WebhookSettings(batchSize: 0).problems == ["webhook batch size must be 1...1000, got 0"])
        #expect(WebhookSettings(batchDelay: .milliseconds(-1)).problems == ["webhook batch delay must be 0...60000 ms"])
        #expect(WebhookSettings(retryInitial: .zero).problems.contains("webhook retry initial delay must be at least 1 ms"))
        #expect(
            WebhookSettings(retryInitial: .seconds(2), retryCap: .seconds(1)).problems == [
                "webhook retry cap must not be below the initial retry delay"
            ])
        #expect(WebhookSettings(retryLimit: .seconds(-1)).problems == ["webhook retry limit must not be negative"])
        var configuration = PusherLocalConfiguration(webhooks: WebhookSettings(batchSize: 5000))
        #expect(configuration.problems == ["webhook batch size must be 1...1000, got 5000"])
        configuration.webhooks = WebhookSettings()
        #expect(configuration.problems.isEmpty)
    }
}
