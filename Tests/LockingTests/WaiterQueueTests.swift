import Locking
import Testing

/// A queue of numbers with a waiter table, as the project's queues use ``WaiterQueue``.
private struct Numbers: Sendable {
    var items: [Int] = []
    var closed = false
    var waiters = WaiterQueue<Int?>()
    /// Tests waiting for waiters to park (``NumberQueue/untilWaiting(_:)``).
    var watchers = WaiterQueue<Bool>()
    /// Times a cancellation's outcome ran.
    var cancellations = 0
}

/// A locked ``Numbers`` and the ways to wait on it.
private final class NumberQueue: Sendable {
    let state = Locked(Numbers())

    /// The first number, waiting for one; `nil` once closed (and empty) or when cancelled.
    func next() async -> Int? {
        await state.wait(in: { $1(&$0.waiters) }, until: Self.take) { state in
            state.cancellations += 1
            return nil
        }
    }

    /// ``next()`` that no cancellation ends.
    func nextUninterruptible() async -> Int? {
        await state.wait(in: { $1(&$0.waiters) }, until: Self.take)
    }

    /// ``next()`` that gives up at `deadline` with -1.
    func next(deadline: ContinuousClock.Instant) async -> Int? {
        await state.wait(in: { $1(&$0.waiters) }, deadline: deadline, until: Self.take, ifTimedOut: { _ in -1 }) { _ in nil }
    }

    private static func take(_ state: inout Numbers) -> Int?? {
        if !state.items.isEmpty { return .some(state.items.removeFirst()) }
        if state.closed { return .some(nil) }
        // The caller parks in this critical section: the watchers look again once it is done.
        state.watchers.resumeAll(returning: false).resume()
        return nil
    }

    /// Hands `number` to the longest waiter, or keeps it.
    func push(_ number: Int) {
        state.withLock { state in
            let wakeUp = state.waiters.resumeFirst(returning: number)
            if wakeUp.count == 0 { state.items.append(number) }
            return wakeUp
        }.resume()
    }

    func close() {
        state.withLock { state in
            state.closed = true
            return state.waiters.resumeAll(returning: nil)
        }.resume()
    }

    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Returns once `count` tasks are parked: woken by each parking (no polling), it looks again.
    func untilWaiting(_ count: Int) async {
        while await !state.wait(in: { $1(&$0.watchers) }, until: { $0.waiters.count >= count ? true : nil }) {}
    }
}

@Suite("WaiterQueue")
struct WaiterQueueTests {
    /// A value ready at the first look is returned without parking.
    @Test func readyValueDoesNotPark() async {
        let queue = NumberQueue()
        queue.push(7)
        #expect(await queue.next() == 7)
        #expect(queue.waiting == 0)
    }

    /// A parked task gets the value handed to the queue.
    @Test func parkedTaskGetsTheValue() async {
        let queue = NumberQueue()
        async let value = queue.next()
        await queue.untilWaiting(1)
        queue.push(3)
        #expect(await value == 3)
        #expect(queue.waiting == 0)
    }

    /// Waiters are served in the order they parked.
    @Test func firstComeFirstServed() async {
        let queue = NumberQueue()
        let order = Locked<[Int]>([])
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<5 {
                group.addTask {
                    let value = await queue.next()
                    order.withLock { $0.append(value ?? -1) }
                    #expect(value == index * 10)
                }
                // The next waiter parks only after this one did.
                await queue.untilWaiting(index + 1)
            }
            for index in 0..<5 {
                queue.push(index * 10)
            }
        }
        #expect(order.withLock { $0.sorted() } == [0, 10, 20, 30, 40])
    }

    /// `resumeAll` wakes every waiter with the one value.
    @Test func resumeAllWakesEveryone() async {
        let queue = NumberQueue()
        await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<8 { group.addTask { await queue.next() } }
            await queue.untilWaiting(8)
            queue.close()
            var results: [Int?] = []
            for await result in group { results.append(result) }
            #expect(results == Array(repeating: nil, count: 8))
        }
        #expect(queue.waiting == 0)
    }

    /// A task cancelled while parked leaves the queue with the cancellation's value; the others stay.
    @Test func cancellationAfterParkingRemovesThatWaiterOnly() async {
        let queue = NumberQueue()
        let first = Task { await queue.next() }
        await queue.untilWaiting(1)
        let second = Task { await queue.next() }
        await queue.untilWaiting(2)
        first.cancel()
        #expect(await first.value == nil)
        #expect(queue.waiting == 1)
        #expect(queue.state.withLock { $0.cancellations } == 1)
        queue.push(5)
        #expect(await second.value == 5)
    }

    /// A task cancelled before it waits never parks: the check under the lock sees the cancellation.
    @Test func cancellationBeforeParkingDoesNotPark() async {
        let queue = NumberQueue()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await queue.next()
        }
        #expect(await task.value == nil)
        #expect(queue.waiting == 0)
        #expect(queue.state.withLock { $0.cancellations } >= 1)
    }

    /// A cancelled task still gets a value that is ready: readiness is checked first.
    @Test func cancelledTaskTakesAReadyValue() async {
        let queue = NumberQueue()
        queue.push(9)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await queue.next()
        }
        #expect(await task.value == 9)
    }

    /// An uninterruptible wait goes on after a cancellation, until the owner resumes it.
    @Test func uninterruptibleWaitIgnoresCancellation() async {
        let queue = NumberQueue()
        let task = Task { await queue.nextUninterruptible() }
        await queue.untilWaiting(1)
        task.cancel()
        // Still parked: only a value or the close ends it.
        #expect(queue.waiting == 1)
        queue.push(8)
        #expect(await task.value == 8)
    }

    /// Values racing cancellations: every waiter ends exactly once, and no value is lost (each
    /// value goes to a waiter or stays in the queue).
    @Test func resumeAndCancelRaceEndsEveryWaiterOnce() async {
        let queue = NumberQueue()
        let count = 200
        let tasks = (0..<count).map { _ in Task { await queue.next() } }
        await queue.untilWaiting(count)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for index in 0..<count { queue.push(index) } }
            group.addTask { for task in tasks.enumerated() where task.offset % 2 == 0 { task.element.cancel() } }
        }
        var received: [Int] = []
        for task in tasks {
            if let value = await task.value { received.append(value) }
        }
        let left = queue.state.withLock { $0.items }
        #expect(Set(received + left) == Set(0..<count))
        #expect(received.count + left.count == count)
        #expect(queue.waiting == 0)
    }

    /// A deadline ends a wait that nothing resumed, not before it passed.
    @Test func deadlineEndsTheWait() async {
        let queue = NumberQueue()
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(50)
        #expect(await queue.next(deadline: deadline) == -1)
        #expect(ContinuousClock.now >= deadline)
        #expect(queue.waiting == 0)
    }

    /// A deadline already passed ends the wait at once (the check under the lock sees it).
    @Test func passedDeadlineDoesNotPark() async {
        let queue = NumberQueue()
        #expect(await queue.next(deadline: .now - .seconds(1)) == -1)
        #expect(queue.waiting == 0)
    }

    /// A value that comes before the deadline wins, and the deadline then does nothing.
    @Test func valueBeforeTheDeadlineWins() async {
        let queue = NumberQueue()
        async let value = queue.next(deadline: .now + .seconds(60))
        await queue.untilWaiting(1)
        queue.push(2)
        #expect(await value == 2)
    }

    /// A cancellation ends a wait with a deadline too.
    @Test func cancellationEndsAWaitWithADeadline() async {
        let queue = NumberQueue()
        let task = Task { await queue.next(deadline: .now + .seconds(60)) }
        await queue.untilWaiting(1)
        task.cancel()
        #expect(await task.value == nil)
    }

    /// Many waiters, served in order, and the storage of the burst is released once they are gone.
    @Test func manyWaitersAndThePeakStorageIsReleased() async {
        let queue = NumberQueue()
        let count = 1_000
        await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<count { group.addTask { await queue.next() } }
            await queue.untilWaiting(count)
            #expect(queue.state.withLock { $0.waiters.storageCapacity } >= count)
            for index in 0..<count { queue.push(index) }
            var values: [Int] = []
            for await value in group { values.append(value ?? -1) }
            #expect(values.sorted() == Array(0..<count))
        }
        #expect(queue.waiting == 0)
        #expect(queue.state.withLock { $0.waiters.storageCapacity } <= WaiterQueue<Int?>.retainedCapacity)
    }

    /// The queue on its own: FIFO, removal by ticket-free paths, and compaction keep the count right.
    @Test func emptyQueueResumesNothing() {
        var waiters = WaiterQueue<Int>()
        #expect(waiters.isEmpty)
        #expect(waiters.resumeFirst(returning: 1).count == 0)
        #expect(waiters.resumeAll(returning: 1).count == 0)
    }
}
