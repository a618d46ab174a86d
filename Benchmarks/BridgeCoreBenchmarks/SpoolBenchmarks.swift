// Spool micro-benchmarks (ordo-one/benchmark). The target's `let benchmarks = { ... }` calls
// `spoolBenchmarks()`. Run with `BENCHMARKS=1 swift package benchmark --target BridgeCoreBenchmarks`.
//
// Each benchmark names its fsync policy: the cost of `always` is one fdatasync per record and
// depends entirely on the disk, so compare policies on the file system that will hold state_dir
// (not tmpfs). One iteration = one record; throughput is records per second.
import Benchmark
import Durability
import Foundation

/// A fresh spool directory for one benchmark run, next to the build (not /tmp, which may be tmpfs).
private func benchmarkDirectory() -> String {
    FileManager.default.currentDirectoryPath + "/.build/spool-benchmarks/run-\(UUID().uuidString)"
}

private func recordPayload(bytes: Int) -> [UInt8] {
    (0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 131) }
}

func spoolBenchmarks() {
    let policies: [(name: String, policy: SpoolFsyncPolicy, scaling: BenchmarkScalingFactor)] = [
        ("never", .never, .kilo),
        ("batch64", .batch(records: 64), .kilo),
        ("always", .always, .one),
    ]
    for recordBytes in [100, 1024] {
        for (name, policy, scaling) in policies {
            let configuration = Benchmark.Configuration(
                metrics: [.wallClock, .throughput, .cpuTotal, .writeSyscalls],
                scalingFactor: scaling,
                maxDuration: .seconds(3)
            )

            Benchmark("Spool append \(recordBytes)B fsync=\(name)", configuration: configuration) { benchmark in
                let directory = benchmarkDirectory()
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let spool = try Spool(directory: directory, configuration: SpoolConfiguration(fsync: policy))
                let payload = recordPayload(bytes: recordBytes)
                benchmark.startMeasurement()
                for _ in benchmark.scaledIterations {
                    blackHole(try spool.append(payload))
                }
                try spool.sync()
                benchmark.stopMeasurement()
                try spool.close()
            }

            Benchmark("Spool drain \(recordBytes)B fsync=\(name)", configuration: configuration) { benchmark in
                let directory = benchmarkDirectory()
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let spool = try Spool(directory: directory, configuration: SpoolConfiguration(fsync: policy))
                let payload = recordPayload(bytes: recordBytes)
                for _ in benchmark.scaledIterations { try spool.append(payload) }
                try spool.sync()
                benchmark.startMeasurement()
                // Read in batches of 256 and acknowledge each batch, as the delivery task does.
                while let last = try spool.read(limit: 256).last {
                    try spool.acknowledge(upTo: last.sequence)
                }
                benchmark.stopMeasurement()
                try spool.close()
            }
        }
    }
}
