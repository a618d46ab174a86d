/// `drain_rate` in `[bridge.pusher]` (MQTT → Pusher) and `[bridge.mqtt]` (Pusher → MQTT): the cap on
/// how fast a backlog leaves after an outage (docs/contract.md §8.3, "paced drain").
extension LoadContext {
    /// The most a `drain_rate` may say, per second.
    static let maxDrainRate = 1_000_000.0

    /// `drain_rate = "500/s"` (or `"/min"`), as messages per second; nil when absent or invalid
    /// (reported).
    func readDrainRate(_ reader: TableReader) -> Double? {
        guard let text = reader.string("drain_rate") else { return nil }
        switch Self.drainRate(text) {
        case .success(let rate): return rate
        case .failure(let problem):
            report(reader.path.key("drain_rate"), problem.message)
            return nil
        }
    }

    struct DrainRateProblem: Error {
        var message: String
    }

    /// Parses `N/s` or `N/min` (N a positive decimal number) into messages per second.
    static func drainRate(_ text: String) -> Result<Double, DrainRateProblem> {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
        let hint = "expected a rate such as \"500/s\" or \"6000/min\", found \"\(text)\""
        guard parts.count == 2, let count = Double(parts[0]), count.isFinite,
            parts[0].allSatisfy({ $0.isNumber || $0 == "." })
        else { return .failure(DrainRateProblem(message: hint)) }
        let perSecond: Double
        switch parts[1] {
        case "s": perSecond = count
        case "min": perSecond = count / 60
        default: return .failure(DrainRateProblem(message: hint))
        }
        guard perSecond > 0 else { return .failure(DrainRateProblem(message: "must be more than 0 (leave it out for no pacing)")) }
        guard perSecond <= maxDrainRate else {
            return .failure(DrainRateProblem(message: "is over \(Int(maxDrainRate))/s; leave it out for no pacing"))
        }
        return .success(perSecond)
    }
}
