import Benchmark

/// Entry point of the BridgeCoreBenchmarks target (built only with `BENCHMARKS=1`).
/// Each file of this target contributes a function that registers its benchmarks; add new
/// ones here (e.g. `spoolBenchmarks()` from SpoolBenchmarks.swift).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1_000
    )
    ruleTableBenchmarks()
}
