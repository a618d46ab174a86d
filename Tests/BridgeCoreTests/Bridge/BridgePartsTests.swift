import Backoff
import TestSupport
import Testing

@testable import BridgeCore

@Suite("PublishCorrelation: publishes paired with their completions")
struct PublishCorrelationTests {
    @Test func completionAfterSend() {
        var correlation = PublishCorrelation<Int, String, String>()
        #expect(correlation.sent("a", id: 1) == nil)
        #expect(correlation.inFlightCount == 1)
        #expect(correlation.completed(1, with: "ok") == "a")
        #expect(correlation.inFlightCount == 0)
        #expect(correlation.earlyCount == 0)
    }

    @Test func completionBeforeSendReturned() {
        var correlation = PublishCorrelation<Int, String, String>()
        #expect(correlation.completed(7, with: "written") == nil)
        #expect(correlation.earlyCount == 1)
        #expect(correlation.sent("b", id: 7) == "written")
        #expect(correlation.inFlightCount == 0)
        #expect(correlation.earlyCount == 0)
    }

    @Test func idsAreIndependent() {
        var correlation = PublishCorrelation<Int, String, String>()
        _ = correlation.sent("a", id: 1)
        _ = correlation.completed(2, with: "early")
        #expect(correlation.completed(1, with: "ok") == "a")
        #expect(correlation.sent("b", id: 2) == "early")
    }
}

@Suite("PusherBatchDelivery: retries and dead letters for the HTTP API")
struct PusherBatchDeliveryTests {
    let policy = ReconnectPolicy(initialDelay: .seconds(1), maxDelay: .seconds(8), multiplier: 2, jitter: 0)

    @Test func acceptedIsDelivered() {
        var delivery = PusherBatchDelivery(policy: policy)
        #expect(delivery.attemptFinished(.accepted, stopping: false, unitRandom: 0.5) == .delivered)
    }

    @Test func clientErrorsAreFinal() {
        var delivery = PusherBatchDelivery(policy: policy)
        #expect(
            delivery.attemptFinished(.status(400, body: "bad"), stopping: false, unitRandom: 0.5)
                == .deadLetter(.rejectedByPusher(status: 400, body: "bad")))
        #expect(
            delivery.attemptFinished(.status(413, body: "big"), stopping: false, unitRandom: 0.5)
                == .deadLetter(.rejectedByPusher(status: 413, body: "big")))
        #expect(
            delivery.attemptFinished(.unsendable(status: 0, body: "no secret"), stopping: false, unitRandom: 0.5)
                == .deadLetter(.rejectedByPusher(status: 0, body: "no secret")))
    }

    @Test func serverErrorsRateLimitsAndNetworkErrorsBackOff() {
        var delivery = PusherBatchDelivery(policy: policy)
        #expect(
            delivery.attemptFinished(.status(503, body: "down"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(1), attempt: 1, reason: "HTTP 503: down"))
        #expect(
            delivery.attemptFinished(.status(429, body: "slow"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(2), attempt: 2, reason: "HTTP 429: slow"))
        #expect(
            delivery.attemptFinished(.networkError("refused"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(4), attempt: 3, reason: "refused"))
        #expect(
            delivery.attemptFinished(.clientEventFailed("not subscribed"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(8), attempt: 4, reason: "not subscribed"))
        #expect(
            delivery.attemptFinished(.networkError("refused"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(8), attempt: 5, reason: "refused"), "capped")
        delivery.startBatch()
        #expect(
            delivery.attemptFinished(.networkError("refused"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(1), attempt: 1, reason: "refused"), "a new batch starts over")
    }

    @Test func whileStoppingAFailedBatchIsKeptForTheNextStart() {
        var delivery = PusherBatchDelivery(policy: policy)
        #expect(delivery.attemptFinished(.networkError("refused"), stopping: true, unitRandom: 0.5) == .keepForNextStart(reason: "refused"))
        #expect(
            delivery.attemptFinished(.status(400, body: "bad"), stopping: true, unitRandom: 0.5)
                == .deadLetter(.rejectedByPusher(status: 400, body: "bad")))
        #expect(delivery.attemptFinished(.accepted, stopping: true, unitRandom: 0.5) == .delivered)
    }

    @Test("403 (over quota, app disabled) pauses at the backoff's cap with the status and body, every time, never a dead letter")
    func forbiddenPausesAtTheCap() {
        var delivery = PusherBatchDelivery(policy: policy)
        let reason = "pusher api refused with 403 (over quota or app disabled): Over quota"
        #expect(
            delivery.attemptFinished(.status(403, body: "Over quota"), stopping: false, unitRandom: 0)
                == .pause(after: .seconds(8), reason: reason))
        #expect(
            delivery.attemptFinished(.status(403, body: "Over quota"), stopping: false, unitRandom: 1)
                == .pause(after: .seconds(8), reason: reason))
        #expect(delivery.attempt == 0, "a pause is not a backoff step")
        #expect(
            delivery.attemptFinished(.status(503, body: "down"), stopping: false, unitRandom: 0.5)
                == .retry(after: .seconds(1), attempt: 1, reason: "HTTP 503: down"))
        #expect(delivery.attemptFinished(.accepted, stopping: false, unitRandom: 0.5) == .delivered)
    }

    @Test("other 4xx stay dead letters next to the 403 pause; a 403 while stopping is kept for the next start")
    func forbiddenIsTheOnlyPause() {
        var delivery = PusherBatchDelivery(policy: policy)
        for status in [400, 401, 404, 413] {
            #expect(
                delivery.attemptFinished(.status(status, body: "no"), stopping: false, unitRandom: 0.5)
                    == .deadLetter(.rejectedByPusher(status: status, body: "no")))
        }
        #expect(
            delivery.attemptFinished(.status(403, body: "App disabled"), stopping: true, unitRandom: 0.5)
                == .keepForNextStart(reason: "pusher api refused with 403 (over quota or app disabled): App disabled"))
        #expect(PusherBatchDelivery.pausesDelivery(status: 403))
        #expect(!PusherBatchDelivery.pausesDelivery(status: 401))
        #expect(!PusherBatchDelivery.pausesDelivery(status: 429))
    }

    @Test("the pause reason is one line: a body's newlines become spaces, a long body is cut, an empty one left out")
    func pauseReasonIsOneShortLine() {
        #expect(
            PusherBatchDelivery.pauseReason(status: 403, body: "  Over\nquota\r\n")
                == "pusher api refused with 403 (over quota or app disabled): Over quota")
        #expect(PusherBatchDelivery.pauseReason(status: 403, body: "") == "pusher api refused with 403 (over quota or app disabled)")
        let long = PusherBatchDelivery.pauseReason(status: 403, body: String(repeating: "q", count: 5000))
        #expect(long.hasSuffix(String(repeating: "q", count: PusherBatchDelivery.pauseReasonBodyLimit) + "…"))
        #expect(long.count < 300)
    }

    @Test func jitterComesFromTheCaller() {
        let jittery = ReconnectPolicy(initialDelay: .seconds(2), maxDelay: .seconds(8), multiplier: 2, jitter: 0.5)
        var low = PusherBatchDelivery(policy: jittery)
        var high = PusherBatchDelivery(policy: jittery)
        #expect(
            low.attemptFinished(.networkError("x"), stopping: false, unitRandom: 0) == .retry(after: .seconds(1), attempt: 1, reason: "x"))
        #expect(
            high.attemptFinished(.networkError("x"), stopping: false, unitRandom: 1) == .retry(after: .seconds(3), attempt: 1, reason: "x"))
    }
}

@Suite("InboundMQTTFilter: echoes and redeliveries")
struct InboundMQTTFilterTests {
    let digest = MessageDigest(topic: "a/b", payload: Array("1".utf8))
    let t0 = TestInstant.at(milliseconds: 0)

    @Test func noRedeliveryCheckBeforeTheFirstConnect() {
        var filter = InboundMQTTFilter<TestInstant>(guardsAgainstEchoes: false)
        #expect(!filter.isCheckingRedeliveries)
        #expect(filter.received(digest, qos: 1, now: t0) == .new)
        #expect(filter.received(digest, qos: 1, now: t0) == .new)
    }

    @Test func theRedeliveryWindowCloses() {
        var filter = InboundMQTTFilter<TestInstant>(guardsAgainstEchoes: false, redeliveryWindow: .seconds(5))
        filter.connected(now: t0)
        #expect(filter.received(digest, qos: 1, now: t0) == .new)
        let later = t0.advanced(by: .seconds(10))
        filter.connected(now: later)
        #expect(filter.isCheckingRedeliveries)
        // Past the window nothing is a redelivery, and the check ends.
        #expect(filter.received(digest, qos: 1, now: later.advanced(by: .seconds(6))) == .new)
        #expect(!filter.isCheckingRedeliveries)
    }

    @Test func echoesAreRecognisedOnlyWhenGuarding() {
        var guarded = InboundMQTTFilter<TestInstant>(guardsAgainstEchoes: true)
        guarded.publishing(digest, now: t0)
        #expect(guarded.received(digest, qos: 0, now: t0) == .echo)
        #expect(guarded.received(digest, qos: 0, now: t0) == .new)
        var unguarded = InboundMQTTFilter<TestInstant>(guardsAgainstEchoes: false)
        unguarded.publishing(digest, now: t0)
        #expect(unguarded.received(digest, qos: 0, now: t0) == .new)
    }

    /// A broker redelivers only QoS ≥ 1 messages: a QoS 0 one is not remembered (the same content
    /// at QoS 1 after a reconnect is new), and without the echo guard its digest is never computed.
    @Test func qos0MessagesAreNeitherHashedNorRemembered() {
        var filter = InboundMQTTFilter<TestInstant>(guardsAgainstEchoes: false)
        filter.connected(now: t0)
        var hashed = 0
        let counted = { () -> MessageDigest in
            hashed += 1
            return digest
        }
        #expect(filter.received(counted(), qos: 0, now: t0) == .new)
        #expect(hashed == 0)
        filter.connected(now: t0.advanced(by: .seconds(1)))
        #expect(filter.received(counted(), qos: 1, now: t0.advanced(by: .seconds(1))) == .new)
        #expect(hashed == 1)
        // The QoS 1 one is remembered: seen again right after the next connect, it is a redelivery.
        filter.connected(now: t0.advanced(by: .seconds(2)))
        #expect(filter.received(counted(), qos: 1, now: t0.advanced(by: .seconds(2))) == .redelivery)
    }
}

@Suite("RateLimitedLog")
struct RateLimitedLogTests {
    @Test func limitsPerMinuteAndCountsTheRest() {
        var log = RateLimitedLog<TestInstant>(perMinute: 2)
        let start = TestInstant.at(milliseconds: 0)
        #expect(log.allow(now: start) == (true, 0))
        #expect(log.allow(now: start) == (true, 0))
        #expect(log.allow(now: start) == (false, 1))
        #expect(log.allow(now: start.advanced(by: .seconds(1))) == (false, 2))
        #expect(log.allow(now: start.advanced(by: .seconds(61))) == (true, 2))
    }
}
