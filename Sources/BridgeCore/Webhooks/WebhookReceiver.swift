import BridgeVocabulary
import PusherProtocol

/// How a webhook request or one of its events was counted in
/// `pusher_mqtt_bridge_webhooks_total{bridge,outcome}` (docs/contract.md §7.2).
public enum WebhookOutcome: String, Sendable, Equatable, CaseIterable {
    /// A request whose publishes are all in the outbox: 200.
    case accepted
    /// A repeat of a body accepted within the window: 200, nothing published.
    case duplicate
    /// Wrong or missing `X-Pusher-Key` or `X-Pusher-Signature`: 401.
    case unauthorized
    /// A body over 1 MiB: 413.
    case tooLarge = "too_large"
    /// A body that is not `{"time_ms"?,"events":[…]}`: 400.
    case badRequest = "bad_request"
    /// The outbox could not take the publishes (docs/guide/webhooks.md, "How a request is answered"): 503, Pusher sends it again.
    case unavailable
    /// One event with a name this version does not know (counted per event, request accepted).
    case unknownEvent = "unknown_event"
    /// One event left out by `[bridge.webhooks] events` (counted per event).
    case ignored
    /// One event without a field it needs (counted per event).
    case invalidEvent = "invalid_event"

    /// The HTTP status of a request with this outcome (per-event outcomes belong to accepted requests).
    public var httpStatus: Int {
        switch self {
        case .accepted, .duplicate, .unknownEvent, .ignored, .invalidEvent: 200
        case .unauthorized: 401
        case .tooLarge: 413
        case .badRequest: 400
        case .unavailable: 503
        }
    }
}

/// A refused webhook request: its outcome (and so its status) and why, for the log.
public struct WebhookRefusal: Sendable, Equatable {
    /// `unauthorized`, `too_large` or `bad_request`.
    public var outcome: WebhookOutcome
    /// Why, without secrets.
    public var reason: String

    /// A refusal from its parts.
    public init(outcome: WebhookOutcome, reason: String) {
        self.outcome = outcome
        self.reason = reason
    }
}

/// An accepted webhook request: what to put in the outbox, and what to count.
public struct WebhookAcceptance: Sendable, Equatable {
    /// The body's digest; pass it to ``WebhookReceiver/requestUnavailable(_:)`` if the publishes cannot be stored.
    public var digest: MessageDigest
    /// The request's events, in order (channel discovery reacts to some, docs/contract.md §7.1).
    public var events: [PusherWebhookEvent]
    /// The body's `time_ms`, when sent: when Pusher made the request (discovery dates its counts by it).
    public var timeMillis: Int64?
    /// The MQTT publishes, in order; each is one Pusher → MQTT arrival.
    public var publishes: [MQTTPublish]
    /// Events skipped, by outcome (`unknown_event`, `ignored`, `invalid_event`).
    public var skipped: [WebhookOutcome: Int]
}

/// What to answer to one webhook request.
public enum WebhookDecision: Sendable, Equatable {
    /// Refused before anything was published (413, 401 or 400).
    case refused(WebhookRefusal)
    /// The same body was accepted within the dedupe window: answer 200, publish nothing.
    case duplicate
    /// Put the publishes into the outbox, then answer 200 (or 503 when that fails).
    case accepted(WebhookAcceptance)
}

/// Checks and translates the webhook requests of one bridge (docs/contract.md §7.2), in this order:
/// the size (over ``maximumBodyBytes`` → 413), then the key and the signature, compared in constant
/// time (→ 401), then the JSON shape (→ 400). An accepted body is remembered for 5 minutes
/// (``WebhookDedupeWindow``): a repeat publishes nothing.
///
/// Pure value type: no I/O, no clock; `now` is passed in.
public struct WebhookReceiver<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// The largest body accepted: 1 MiB.
    public static var maximumBodyBytes: Int { 1 << 20 }
    /// The app key `X-Pusher-Key` must equal.
    public let key: String
    private let secret: String
    /// Translation and the members known per channel.
    public private(set) var translator: WebhookTranslator
    private var dedupe: WebhookDedupeWindow<Instant>

    /// A receiver for `settings`' webhooks; `nil` when the bridge has no `[bridge.webhooks]` or no secret.
    public init?(settings: BridgeSettings, dedupe: WebhookDedupeWindow<Instant> = WebhookDedupeWindow()) {
        guard let webhooks = settings.webhooks, let secret = settings.pusher.secret else { return nil }
        self.init(webhooks: webhooks, key: settings.pusher.key, secret: secret.value, dedupe: dedupe)
    }

    /// A receiver from its parts.
    public init(
        webhooks: BridgeWebhookSettings, key: String, secret: String, dedupe: WebhookDedupeWindow<Instant> = WebhookDedupeWindow()
    ) {
        self.key = key
        self.secret = secret
        self.translator = WebhookTranslator(settings: webhooks)
        self.dedupe = dedupe
    }

    /// New `[bridge.webhooks]` after a reload (key and secret changes restart the bridge instead).
    public mutating func settingsChanged(to webhooks: BridgeWebhookSettings) {
        translator.settingsChanged(to: webhooks)
    }

    /// A request arrived: `body` as received, `key` and `signature` the `X-Pusher-Key` and
    /// `X-Pusher-Signature` headers (`nil` when absent).
    public mutating func requestReceived(body: [UInt8], key: String?, signature: String?, now: Instant) -> WebhookDecision {
        guard body.count <= Self.maximumBodyBytes else {
            return .refused(WebhookRefusal(outcome: .tooLarge, reason: "body of \(body.count) bytes is over 1 MiB"))
        }
        let expected = hmacSHA256Hex(secret: secret, message: body)
        // Both comparisons always run, so the time taken says nothing about which one failed.
        let keyMatches = constantTimeEqual(key ?? "", self.key)
        let signatureMatches = constantTimeEqual((signature ?? "").lowercased(), expected)
        guard keyMatches, signatureMatches else {
            let reason =
                key == nil
                ? "no X-Pusher-Key"
                : !keyMatches
                    ? "X-Pusher-Key is not this bridge's key"
                    : signature == nil ? "no X-Pusher-Signature" : "X-Pusher-Signature does not match the body"
            return .refused(WebhookRefusal(outcome: .unauthorized, reason: reason))
        }
        let parsed: PusherWebhookBody
        switch PusherWebhookBody.parse(body) {
        case .success(let value): parsed = value
        case .failure(let error): return .refused(WebhookRefusal(outcome: .badRequest, reason: error.description))
        }
        let digest = MessageDigest(parts: [body])
        if dedupe.isRepeat(digest, now: now) { return .duplicate }
        var publishes: [MQTTPublish] = []
        var skipped: [WebhookOutcome: Int] = [:]
        for event in parsed.events {
            switch translator.translate(event, into: &publishes) {
            case .published: break
            case .unknownEvent: skipped[.unknownEvent, default: 0] += 1
            case .ignored: skipped[.ignored, default: 0] += 1
            case .invalidEvent: skipped[.invalidEvent, default: 0] += 1
            }
        }
        return .accepted(
            WebhookAcceptance(
                digest: digest, events: parsed.events, timeMillis: parsed.timeMillis, publishes: publishes, skipped: skipped))
    }

    /// The publishes of an accepted request could not be stored (answered 503): forget its body,
    /// so that Pusher's retry goes through.
    public mutating func requestUnavailable(_ digest: MessageDigest) {
        dedupe.forget(digest)
    }
}
