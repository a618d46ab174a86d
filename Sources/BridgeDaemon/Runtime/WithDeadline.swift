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
