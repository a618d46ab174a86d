/// Waits until `condition` holds, checking it every 10 ms, and throws ``TestFailure`` naming
/// `what` (and what `detail` says then) at the deadline. For states of real servers and clients
/// that have no event to await; a passing test never waits the deadline out.
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(20), detail: @Sendable () -> String = { "" },
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            let extra = detail()
            throw TestFailure("timed out after \(timeout) waiting until \(what)" + (extra.isEmpty ? "" : ": " + extra))
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}
