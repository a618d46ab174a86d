/// A manual clock over `ContinuousClock`'s instants: time is `t0 + offset`, advanced by the test,
/// never slept (for machines that take `ContinuousClock.Instant`s).
public struct ManualClock: Sendable {
    public let t0 = ContinuousClock.now
    public var offset: Duration = .zero
    public var now: ContinuousClock.Instant { t0 + offset }

    public init() {}

    public mutating func advance(_ duration: Duration) { offset += duration }
}

/// A manual clock's instant: time as data, no sleeping (docs/style.md §2), for the machines
/// generic over `InstantProtocol`.
public struct TestInstant: InstantProtocol, Sendable {
    public var offset: Duration

    public init(offset: Duration) { self.offset = offset }

    public func advanced(by duration: Duration) -> TestInstant { TestInstant(offset: offset + duration) }
    public func duration(to other: TestInstant) -> Duration { other.offset - offset }
    public static func < (lhs: TestInstant, rhs: TestInstant) -> Bool { lhs.offset < rhs.offset }
    public static func at(milliseconds: Int64) -> TestInstant { TestInstant(offset: .milliseconds(milliseconds)) }
}
