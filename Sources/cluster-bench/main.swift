// cluster-bench: a cluster of 50 members sharing 1,000,000 Pusher channels, simulated on a manual
// clock (docs/history/benchmarks.md, "Cluster at scale"; issue 31). Every member is the real
// `ClusterMembership`, every message the real payload; the broker is in memory (no latency, no
// loss), Pusher confirms a subscription 200 ms after it is asked for.
//
//     swift build -c release --product cluster-bench && .build/release/cluster-bench [MEMBERS] [CHANNELS] [NAME-LENGTH]
//
// Defaults: 50 members, 1,000,000 channels named `device-0000001` (14 bytes; longer names only
// make the held messages longer and more numerous). Four changes, one after the other:
//   cold start  every member starts at the same instant;
//   join        one more member starts;
//   leave       that member gets SIGTERM (hands its channels over, deletes its record);
//   die         another member is SIGKILLed (its Will deletes its record).
// For each: the convergence time on the simulated clock, from the change until every channel is
// held (confirmed by Pusher) by exactly one member, the one the hashing picks among the running
// members; the membership messages published from the change until 2 s after convergence,
// heartbeats apart (their count and bytes, by kind, and the largest); the wall time the
// simulation took, and its CPU time (the machine is shared: CPU time is the steadier figure). At
// the end: the peak resident memory (VmHWM).
import BridgeCore
import Foundation

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let memberCount = arguments.count > 0 ? arguments[0] : 50
let channelCount = arguments.count > 1 ? arguments[1] : 1_000_000
let nameLength = arguments.count > 2 ? arguments[2] : 14

/// The peak resident set of this process, from /proc/self/status.
func peakResidentMB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
    else { return 0 }
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
}

func seconds(_ duration: Duration) -> String {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return String(format: "%.2f s", value)
}

let setupClock = ContinuousClock.now
let simulation = ScaleSimulation(channels: channelCount, nameLength: nameLength)
print("cluster-bench: \(memberCount) members, \(channelCount) channels of \(nameLength) bytes; setup \(seconds(.now - setupClock))")
print("change      | members | converged in (simulated) | messages (held, resync, members) | bytes | largest | wall | CPU")

@MainActor func measure(_ label: String, limit: Duration = .seconds(120), leaving: String? = nil, _ change: () -> Void) {
    let wall = ContinuousClock.now
    let cpu = clock()
    simulation.mark()
    let changedAt = simulation.now
    change()
    // The owners after the change: the running members, but for one leaving.
    simulation.expectOwners(simulation.running.filter { $0 != leaving })
    let converged = simulation.run(until: { simulation.converged }, limit: limit)
    let took = simulation.now - changedAt
    _ = simulation.run(until: { false }, limit: .seconds(2))
    let traffic = simulation.traffic
    let kinds = ["held", "resync", "members", "discovered"]
    let count = kinds.map { traffic.messages[$0] ?? 0 }.reduce(0, +)
    let bytes = kinds.map { traffic.bytes[$0] ?? 0 }.reduce(0, +)
    let parts = "\(traffic.messages["held"] ?? 0), \(traffic.messages["resync"] ?? 0), \(traffic.messages["members"] ?? 0)"
    print(
        "\(label.padding(toLength: 11, withPad: " ", startingAt: 0)) | \(simulation.ownerNames.count) | "
            + (converged ? seconds(took) : "NOT within \(limit) (\(simulation.bad) channels off)")
            + " | \(count) (\(parts)) | \(bytes) | \(traffic.largest) | \(seconds(.now - wall)) | "
            + String(format: "%.2f s", Double(clock() - cpu) / Double(CLOCKS_PER_SEC)))
}

let members = (0..<memberCount).map { "m\($0)" }
measure("cold start") { for name in members { simulation.start(name) } }
measure("join") { simulation.start("joiner") }
measure("leave", leaving: "joiner") { simulation.terminate("joiner") }
measure("die") { simulation.kill(members[memberCount / 2]) }
_ = simulation.run(until: { false }, limit: .seconds(60))
simulation.mark()
_ = simulation.run(until: { false }, limit: .seconds(60))
let steady = simulation.traffic
print(
    "steady 60 s: \(steady.messages["heartbeat"] ?? 0) heartbeats, \(steady.messages["held"] ?? 0) held messages "
        + "(\(steady.bytes["held"] ?? 0) bytes; a full snapshot per member every 600 heartbeats), largest \(steady.largest)")
print("peak resident memory: \(peakResidentMB()) MB; total wall \(seconds(.now - setupClock))")
