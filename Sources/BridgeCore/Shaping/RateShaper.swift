/// Per-target rate shaping of one rule (docs/contract.md §7.3): `throttle` and `on_change`.
///
/// A *target* is what the rule renders a message to: the channel and event for MQTT → Pusher,
/// the topic for Pusher → MQTT; the caller names it with one string.
///
/// **throttle** is trailing-edge: the first message for a quiet target opens an interval of
/// `throttle` and is held; every message within the interval replaces the held one (the newest
/// wins; each one replaced is `coalesced`); when the interval ends ``due(now:)`` releases the held
/// message, and the next message after that opens a new interval. So at most one message per
/// target per interval goes out, always the latest of its interval.
///
/// **on_change** drops a message whose payload bytes equal the last payload forwarded (or
/// released) for its target (`unchanged`). With `throttle` on as well, the comparison is made at
/// release, since only the latest message of an interval counts.
///
/// Both lose messages by design. Nothing is ever dropped for want of memory: targets are
/// remembered up to `maxTargets`; a new target beyond that is forwarded unshaped. A target with
/// nothing held and no message for max(`throttle`, 10 min) is forgotten at the next call (targets
/// are kept in the order of their last message, so this is O(1) amortised per call, never a scan).
/// For `on_change` a payload of up to 32 bytes is kept as is, a longer one as a 128-bit
/// ``MessageDigest``.
///
/// Call ``due(now:)`` before ``offer(_:target:payload:now:)`` at the same instant: a message
/// offered after its target's interval ended but before `due` ran replaces the held one
/// (`coalesced`), and goes out at the next `due`.
///
/// Pure value type; time is passed in, never read.
public struct RateShaper<Instant: InstantProtocol, Message: Sendable>: Sendable where Instant.Duration == Duration {
    /// A rule's shaping options.
    public struct Settings: Sendable, Hashable {
        /// The interval of `throttle`; nil (or not positive) = off.
        public var throttle: Duration?
        /// `on_change`: drop a payload equal to the last one forwarded for its target.
        public var onChange: Bool
        /// Cap on targets remembered per rule (at least 1).
        public var maxTargets: Int

        /// Settings for one rule.
        public init(throttle: Duration?, onChange: Bool, maxTargets: Int = 10_000) {
            self.throttle = throttle
            self.onChange = onChange
            self.maxTargets = maxTargets
        }
    }

    /// What to do with an offered message.
    public enum Offer: Sendable {
        /// Send the message now.
        case forward(Message)
        /// Throttled: kept as the target's latest; `coalesced` earlier held ones were replaced by it
        /// (0 or 1), each to be counted with outcome `coalesced`.
        case held(coalesced: Int)
        /// `on_change`: equal to the last payload forwarded for the target; count it as `unchanged`.
        case unchanged
        /// The cap of targets was reached: send it now without shaping (the caller counts it).
        case forwardUnshaped(Message)
    }

    /// A held message whose throttle interval ended: send it now.
    public struct Release: Sendable {
        /// The target it was held for.
        public var target: String
        /// The message.
        public var message: Message
    }

    /// How long a quiet target with nothing held is remembered at least.
    public static var minimumMemory: Duration { .seconds(600) }

    /// The settings in force (a non-positive throttle normalised to nil, `maxTargets` to ≥ 1).
    public let settings: Settings
    /// How long a target with nothing held is remembered after its last message.
    public let memory: Duration

    private struct Held: Sendable {
        var message: Message
        var fingerprint: PayloadFingerprint?
    }

    private struct TargetState: Sendable {
        var held: Held?
        var lastForwarded: PayloadFingerprint?
        var lastSeen: Instant
    }

    /// The remembered targets, in the order of their last message.
    private var targets = RecencyList<String, TargetState>()
    /// Targets with a held message, by the end of their interval.
    private var intervals = DeadlineQueue<Instant, String>()

    /// A shaper with nothing remembered.
    public init(_ settings: Settings) {
        var normalised = settings
        if let throttle = settings.throttle, throttle <= .zero { normalised.throttle = nil }
        normalised.maxTargets = max(1, settings.maxTargets)
        self.settings = normalised
        self.memory = max(normalised.throttle ?? .zero, Self.minimumMemory)
    }

    /// When ``due(now:)`` next has something to release (nil: nothing held).
    public var nextDeadline: Instant? { intervals.earliest }

    /// Targets remembered (the gauge `pusher_mqtt_bridge_throttle_targets`).
    public var targetCount: Int { targets.count }

    /// Messages held now (one at most per target).
    public var heldCount: Int { intervals.count }

    /// A message for `target` with these payload bytes arrived at `now`.
    public mutating func offer(_ message: Message, target: String, payload: [UInt8], now: Instant) -> Offer {
        guard settings.throttle != nil || settings.onChange else { return .forward(message) }
        forgetQuietTargets(now: now)
        let fingerprint = settings.onChange ? PayloadFingerprint(payload) : nil
        guard var state = targets[target] else {
            guard targets.count < settings.maxTargets else { return .forwardUnshaped(message) }
            return firstOffer(message, target: target, fingerprint: fingerprint, now: now)
        }
        state.lastSeen = now
        if let throttle = settings.throttle {
            if var held = state.held {
                held.message = message
                held.fingerprint = fingerprint
                state.held = held
                targets.touch(target, state)
                return .held(coalesced: 1)
            }
            let end = now.advanced(by: throttle)
            state.held = Held(message: message, fingerprint: fingerprint)
            intervals.push(target, at: end)
            targets.touch(target, state)
            return .held(coalesced: 0)
        }
        // on_change alone.
        if let fingerprint, state.lastForwarded == fingerprint {
            targets.touch(target, state)
            return .unchanged
        }
        state.lastForwarded = fingerprint
        targets.touch(target, state)
        return .forward(message)
    }

    /// Messages whose throttle interval ended by `now` (in the order their intervals end), plus how
    /// many were `unchanged` at release (`on_change` with `throttle`).
    public mutating func due(now: Instant) -> (releases: [Release], unchanged: Int) {
        var releases: [Release] = []
        var unchanged = 0
        while let entry = intervals.popDue(now: now) {
            guard var state = targets[entry.key], let held = state.held else { continue }
            state.held = nil
            if settings.onChange, let fingerprint = held.fingerprint, state.lastForwarded == fingerprint {
                unchanged += 1
            } else {
                state.lastForwarded = held.fingerprint
                releases.append(Release(target: entry.key, message: held.message))
            }
            targets.update(entry.key, state)
        }
        forgetQuietTargets(now: now)
        return (releases, unchanged)
    }

    private mutating func firstOffer(_ message: Message, target: String, fingerprint: PayloadFingerprint?, now: Instant) -> Offer {
        if let throttle = settings.throttle {
            let end = now.advanced(by: throttle)
            targets.touch(target, TargetState(held: Held(message: message, fingerprint: fingerprint), lastForwarded: nil, lastSeen: now))
            intervals.push(target, at: end)
            return .held(coalesced: 0)
        }
        targets.touch(target, TargetState(held: nil, lastForwarded: fingerprint, lastSeen: now))
        return .forward(message)
    }

    /// Forgets targets with nothing held whose last message is `memory` old, oldest first. A held
    /// message stops the sweep: its interval has ended, and ``due(now:)`` releases it first (it
    /// runs before this sweep in `due`, so there it never stops early).
    private mutating func forgetQuietTargets(now: Instant) {
        while let oldest = targets.oldest, oldest.value.held == nil, oldest.value.lastSeen.advanced(by: memory) <= now {
            targets.removeOldest()
        }
    }
}

/// What `on_change` remembers of a payload: the bytes themselves up to 32 bytes, a 128-bit
/// ``MessageDigest`` beyond (the two never compare equal: their lengths differ).
enum PayloadFingerprint: Hashable, Sendable {
    /// A payload of at most ``PayloadFingerprint/inlineLimit`` bytes, kept as is.
    case bytes([UInt8])
    /// A longer payload, by its digest.
    case digest(MessageDigest)

    /// The longest payload kept as bytes.
    static let inlineLimit = 32

    /// The fingerprint of `payload`.
    init(_ payload: [UInt8]) {
        self = payload.count <= Self.inlineLimit ? .bytes(payload) : .digest(MessageDigest(parts: [payload]))
    }
}
