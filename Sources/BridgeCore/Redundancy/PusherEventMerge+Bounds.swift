/// The merge's bounds and what it counts (docs/pusher-merge.md, "Window, bounds and what happens
/// past them").
extension PusherEventMerge {
    /// The merge's bounds.
    public struct Limits: Sendable, Equatable {
        /// How long an entry can be matched after it was published (default 10 s).
        public var window: Duration
        /// Entries kept per channel at most (default 1,024); past it the oldest leaves early.
        public var maxEntries: Int
        /// How far back a connection that becomes live may match (default 2 s, at most `window`).
        public var joinGrace: Duration
        /// How long the first copies of a connection that has just become live beside another
        /// are held back for that other's copies (``Verdict/held``); zero: never held.
        public var joinHold: Duration

        /// The defaults: a 10 s window, 1,024 entries per channel, a 2 s join grace.
        public static let `default` = Limits(window: .seconds(10), maxEntries: 1024, joinGrace: .seconds(2))

        /// The bridge's: the defaults with a 1 s join hold (docs/pusher-merge.md, "Order after a join").
        public static let bridge = Limits(window: .seconds(10), maxEntries: 1024, joinGrace: .seconds(2), joinHold: .seconds(1))

        /// Limits with `joinGrace` and `joinHold` clamped to `window` and `maxEntries` to at least 1.
        public init(window: Duration, maxEntries: Int, joinGrace: Duration, joinHold: Duration = .zero) {
            self.window = max(window, .zero)
            self.maxEntries = max(maxEntries, 1)
            self.joinGrace = min(max(joinGrace, .zero), self.window)
            self.joinHold = min(max(joinHold, .zero), self.window)
        }
    }

    /// What the merge decided, since it was made (docs/pusher-merge.md, "Counters").
    public struct Counters: Sendable, Equatable {
        /// Events published (first copies, late copies included).
        public var published: UInt64 = 0
        /// Copies suppressed (`outcome="duplicate"`).
        public var duplicates: UInt64 = 0
        /// Events published that were taken for copies arriving later than the window.
        public var lateCopies: UInt64 = 0
        /// Entries that left the log while a live connection had not delivered them (it missed
        /// them, or its copy comes late).
        public var expiredUnmatched: UInt64 = 0
        /// Entries pushed out by ``Limits/maxEntries`` before ``Limits/window`` had passed.
        public var evictedByCount: UInt64 = 0
        /// Copies suppressed that a connection delivered just after becoming live, matched to an
        /// entry published before it did (the ambiguous case of the join rule).
        public var joinMatches: UInt64 = 0
        /// Copies of the bridge's own publishes suppressed (``Verdict/ownEcho``).
        public var ownEchoes: UInt64 = 0
        /// First copies held back after a join (``Verdict/held``), and of them those released by
        /// the join hold's end rather than by the other connection's copy.
        public var held: UInt64 = 0
        public var heldReleasedByTime: UInt64 = 0
    }
}
