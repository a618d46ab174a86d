// spool-bench: release-mode throughput of the Durability spool, per record size and fsync policy.
//
//     swift run -c release spool-bench [DIRECTORY]
//     spool-bench crash-writer DIRECTORY always|batch|never   (used by the SIGKILL test)
//
// DIRECTORY (default: ./.build/spool-bench) must be on the file system the daemon's
// state_dir will use: tmpfs would hide the cost of fsync. Each case runs 3 times in a fresh
// spool; the median is printed. "append" = append N records under the policy (plus a final
// sync); "drain" = read them back in batches of 256 and acknowledge each batch with
// acknowledge(upTo:), which also deletes delivered segments (default 4 MiB segments);
// "drain, ack each" = the same with acknowledge(_:) per record.
import Durability
import Foundation

struct Case {
    var name: String
    var policy: SpoolFsyncPolicy
    var recordBytes: Int
    var records: Int
}

struct Measurement {
    var appendSeconds: Double
    var drainSeconds: Double
    var drainEachSeconds: Double
}

func seconds(_ duration: Duration) -> Double {
    let parts = duration.components
    return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
}

func run(_ benchCase: Case, in base: String) throws -> Measurement {
    let directory = base + "/run-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let spool = try Spool(directory: directory, configuration: SpoolConfiguration(fsync: benchCase.policy))
    let payload = (0..<benchCase.recordBytes).map { UInt8(truncatingIfNeeded: $0 &* 131) }
    let clock = ContinuousClock()

    let appendStart = clock.now
    for _ in 0..<benchCase.records {
        try spool.append(payload)
    }
    try spool.sync()
    let appendTime = clock.now - appendStart

    let drainStart = clock.now
    var drained = 0
    var checksum = 0
    while true {
        let batch = try spool.read(limit: 256)
        guard let last = batch.last else { break }
        drained += batch.count
        checksum &+= batch.count &+ Int(batch[0].payload.first ?? 0)
        try spool.acknowledge(upTo: last.sequence)
    }
    let drainTime = clock.now - drainStart
    guard drained == benchCase.records, checksum != 0 || benchCase.records == 0 else {
        throw CocoaError(.fileReadCorruptFile)
    }

    // The same backlog again, acknowledged one record at a time (one acknowledgement record,
    // i.e. one write(2), per message), as a delivery task acknowledging each PUBACK would.
    for _ in 0..<benchCase.records { try spool.append(payload) }
    try spool.sync()
    let eachStart = clock.now
    var drainedEach = 0
    while true {
        let batch = try spool.read(limit: 256)
        if batch.isEmpty { break }
        for record in batch { try spool.acknowledge(record.sequence) }
        drainedEach += batch.count
    }
    let eachTime = clock.now - eachStart
    guard drainedEach == benchCase.records else { throw CocoaError(.fileReadCorruptFile) }
    try spool.close()
    return Measurement(
        appendSeconds: seconds(appendTime),
        drainSeconds: seconds(drainTime),
        drainEachSeconds: seconds(eachTime)
    )
}

func median(_ values: [Double]) -> Double {
    values.sorted()[values.count / 2]
}

/// `spool-bench crash-writer DIRECTORY FSYNC`: appends records forever and prints each
/// returned sequence on its own line, flushed, so a test can SIGKILL it at a random moment and
/// check that recovery returns at least every record whose `append` had returned.
/// The payload of record n is `recordPayload(n)`, which the test recomputes.
func crashWriter(directory: String, policyName: String) throws -> Never {
    let policy: SpoolFsyncPolicy =
        switch policyName {
        case "always": .always
        case "never": .never
        case "onsync": .onSync
        default: .batch(records: 64)
        }
    let spool = try Spool(
        directory: directory,
        configuration: SpoolConfiguration(fsync: policy, segmentBytes: 64 << 10)
    )
    var sequence = spool.lastSequence
    while true {
        sequence += 1
        let written = try spool.append(crashWriterPayload(sequence))
        FileHandle.standardOutput.write(Data("\(written)\n".utf8))
    }
}

/// Record n: 1 + n % 700 bytes derived from n, so a shifted or mixed-up record is visible.
func crashWriterPayload(_ sequence: UInt64) -> [UInt8] {
    (0..<(1 + Int(sequence % 700))).map { UInt8(truncatingIfNeeded: Int(sequence) &* 7 &+ $0) }
}

if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "crash-writer" {
    try crashWriter(directory: CommandLine.arguments[2], policyName: CommandLine.arguments[3])
}

let base =
    CommandLine.arguments.count > 1
    ? CommandLine.arguments[1] : FileManager.default.currentDirectoryPath + "/.build/spool-bench"
try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)

var cases: [Case] = []
for size in [100, 1024] {
    cases.append(Case(name: "never", policy: .never, recordBytes: size, records: size == 100 ? 200_000 : 50_000))
    cases.append(Case(name: "onSync", policy: .onSync, recordBytes: size, records: size == 100 ? 200_000 : 50_000))
    cases.append(
        Case(name: "batch(64)", policy: .batch(records: 64), recordBytes: size, records: size == 100 ? 100_000 : 30_000)
    )
    cases.append(Case(name: "always", policy: .always, recordBytes: size, records: 2_000))
}

print("spool-bench: directory \(base), 3 runs per case, median shown")
print("| fsync | record | records | append rec/s | append MB/s | drain rec/s | drain MB/s | drain, ack each, rec/s |")
print("|---|---|---|---|---|---|---|---|")
for benchCase in cases {
    var runs: [Measurement] = []
    for _ in 0..<3 { runs.append(try run(benchCase, in: base)) }
    let append = median(runs.map(\.appendSeconds))
    let drain = median(runs.map(\.drainSeconds))
    let drainEach = median(runs.map(\.drainEachSeconds))
    let records = Double(benchCase.records)
    let megabytes = records * Double(benchCase.recordBytes) / 1_000_000
    func format(_ value: Double) -> String { String(format: "%.0f", value) }
    func formatMB(_ value: Double) -> String { String(format: "%.1f", value) }
    print(
        "| \(benchCase.name) | \(benchCase.recordBytes) B | \(benchCase.records) | \(format(records / append)) | \(formatMB(megabytes / append)) | \(format(records / drain)) | \(formatMB(megabytes / drain)) | \(format(records / drainEach)) |"
    )
}
