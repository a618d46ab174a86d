// swift-tools-version: 6.2
// pusher-mqtt-bridge: Pusher Channels <-> MQTT, for Linux servers.
// Licensed under the Apache License, Version 2.0: LICENSE and NOTICE at the root.
//
// Folder = part (see docs/development.md, "Layout"). Dependencies point one way, toward the pure core
// (our modules only; each target's `dependencies` below list exactly what its files import):
//   pusher-mqtt-bridge (exe) -> BridgeDaemon, BridgeCore, PusherChannels
//   BridgeDaemon    -> Durability, BridgeCore, PusherChannels, MosquittoClient, MQTTVocabulary, PusherProtocol, Backoff, Locking, CGlibcMalloc
//   Durability      -> BridgeVocabulary, MQTTVocabulary (the buffer's limits and overflow policy, the messages its
//                      record format holds; not BridgeCore, whose TOMLKit would come along)
//   BridgeCore      -> BridgeVocabulary (re-exported), MQTTVocabulary, PusherProtocol, Backoff
//   BridgeVocabulary -> MQTTVocabulary
//   MosquittoClient -> MQTTVocabulary, CMosquitto, Backoff, Locking
//   PusherChannels  -> PusherProtocol, Backoff, Locking, CSodium
//   PusherLocal     -> PusherProtocol, Locking
//   pusher-local (exe) -> PusherLocal
//   MQTTVocabulary, PusherProtocol, Backoff, Locking: the leaves (no dependency of ours; BridgeVocabulary only on MQTTVocabulary)
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "pusher-mqtt-bridge",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PusherChannels", targets: ["PusherChannels"]),
        .library(name: "PusherLocal", targets: ["PusherLocal"]),
        .library(name: "MosquittoClient", targets: ["MosquittoClient"]),
        .library(name: "BridgeCore", targets: ["BridgeCore"]),
        .executable(name: "pusher-local", targets: ["pusher-local"]),
        .executable(name: "pusher-mqtt-bridge", targets: ["pusher-mqtt-bridge"]),
        .executable(name: "mqtt-bench", targets: ["mqtt-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Up to the next minor only: PusherChannels runs WSCore's WebSocketHandler through its
        // WSInternal SPI (Sources/PusherChannels/WebSocket/PusherWebSocket.swift), which a minor
        // release may change; check it against WSClient's WebSocketClientChannel.handle when moving on.
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", .upToNextMinor(from: "1.6.2")),
        // No traits: the default `FullFoundation` links all of Foundation (and through it ICU) for
        // URL-encoded-form dates, `ConfigurationSupport` swift-configuration; the daemon needs neither
        // (docs/architecture.md "What the binary links").
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/LebJe/TOMLKit.git", exact: "0.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // MARK: shared vocabulary

        /// Capped exponential backoff with jitter, shared by the Pusher and the MQTT side (docs/contract.md §5.5).
        .target(name: "Backoff", swiftSettings: swiftSettings),
        /// The project's one lock (`Locked`, pthread-based so ThreadSanitizer sees it; not
        /// `Synchronization.Mutex`, whose futex TSan cannot see).
        .target(name: "Locking", swiftSettings: swiftSettings),
        /// The MQTT words MosquittoClient and BridgeCore share: QoS, protocol version, user
        /// property, subscription options. Pure values, no dependencies.
        .target(name: "MQTTVocabulary", exclude: ["README.md"], swiftSettings: swiftSettings),
        /// The bridge words BridgeCore, Durability and the daemon share: buffer limits, counters and
        /// overflow policy, timestamps, directions and metric labels, the messages a rule produces
        /// (`MQTTPublish`, `PusherEventPublish`). Pure values; BridgeCore re-exports it.
        .target(name: "BridgeVocabulary", dependencies: ["MQTTVocabulary"], exclude: ["README.md"], swiftSettings: swiftSettings),
        /// Pusher wire vocabulary shared by the client core and pusher-local:
        /// signatures, names and limits, close codes.
        .target(
            name: "PusherProtocol",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),

        // MARK: C libraries from Debian

        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // glibc's malloc_trim (BridgeDaemon's FreeMemory): part of libc, nothing to link.
        .systemLibrary(name: "CGlibcMalloc"),

        // MARK: parts

        /// The Pusher Channels client core and the signed HTTP API client.
        .target(
            name: "PusherChannels",
            dependencies: [
                "PusherProtocol", "Backoff", "CSodium", "Locking",
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        /// One connection set up in memory before a server accepts any (a Swift runtime race at
        /// first-time metadata instantiation; docs/history/reliability.md).
        .target(
            name: "ServerWarmUp",
            dependencies: [
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        /// A local Pusher-compatible server (WebSocket protocol 7 + HTTP API), as a library.
        .target(
            name: "PusherLocal",
            dependencies: [
                "PusherProtocol", "Locking", "ServerWarmUp",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "pusher-local",
            dependencies: [
                "PusherLocal",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        /// The only Swift code that imports libmosquitto.
        .target(
            name: "MosquittoClient",
            dependencies: [
                "MQTTVocabulary", "CMosquitto", "Backoff", "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        /// The bridge's brain: config, rule table, templates, presence mirror, buffer. Pure logic.
        .target(
            name: "BridgeCore",
            dependencies: [
                "BridgeVocabulary", "MQTTVocabulary", "Backoff", "PusherProtocol",
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            exclude: ["README.md"],
            // TOMLKit loads all of Foundation; without MemberImportVisibility its `String.contains(_:)`
            // and `range(of:)` would win over the standard library's and keep libFoundation.so linked.
            swiftSettings: swiftSettings + [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        /// What survives a restart: the on-disk spool (segment files, record format, CRC-32C,
        /// recovery, compaction) and the bounded delivery backlog that writes through to it.
        /// The one part that owns files; BridgeVocabulary gives it its limits and the messages its
        /// records hold (`MessageRecordFormat`), without BridgeCore and its TOMLKit.
        .target(
            name: "Durability",
            dependencies: [
                "BridgeVocabulary", "MQTTVocabulary",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        /// The daemon's runtime: bridges wired to both clients, lifecycle, reload, systemd notify,
        /// metrics and health endpoint, log formats. A library so tests can run it in-process.
        .target(
            name: "BridgeDaemon",
            dependencies: [
                "BridgeCore", "Durability", "PusherChannels", "PusherProtocol", "MosquittoClient", "MQTTVocabulary", "Backoff",
                "Locking", "CGlibcMalloc", "ServerWarmUp",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        /// Release-mode throughput measurement of the spool: `swift run -c release spool-bench`.
        .executableTarget(name: "spool-bench", dependencies: ["Durability"], swiftSettings: swiftSettings),
        /// Release-mode cost of `RuleTable.route` with 1…10,000 rules, plain and with payload rules
        /// (`where`, `{json:…}`): `swift run -c release rules-bench` (BENCHMARKS.md "Payload rules").
        .executableTarget(name: "rules-bench", dependencies: ["BridgeCore"], swiftSettings: swiftSettings),
        /// A cluster of 50 members sharing 1,000,000 channels on a manual clock: convergence time and
        /// messages per membership change (`swift run -c release cluster-bench`; BENCHMARKS.md "Clusters").
        .executableTarget(name: "cluster-bench", dependencies: ["BridgeCore"], swiftSettings: swiftSettings),
        /// The cost of registering `messages_total` series as the rules grow, the registry's way
        /// against the daemon's (`swift run -c release metrics-bench`; BENCHMARKS.md).
        .executableTarget(
            name: "metrics-bench",
            dependencies: [
                "BridgeCore", "BridgeDaemon", .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings),
        /// The daemon and its command line.
        .executableTarget(
            name: "pusher-mqtt-bridge",
            dependencies: [
                "BridgeCore", "BridgeDaemon", "PusherChannels",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["link-as-needed.cfg"],
            swiftSettings: swiftSettings,
            // TOMLKit's `import struct Foundation.Data` (and .Date, .Calendar) asks the linker for all of
            // Foundation, none of whose symbols is used (those types are FoundationEssentials'); linked
            // as needed, libFoundation.so, FoundationInternationalization and ICU are not loaded (8 MB of
            // RSS). Through a clang config file because its options come before the autolinked
            // libraries, where `--as-needed` must be (an `-Xlinker` flag comes after them); the file
            // also picks lld with packed relative relocations (1–1.7 MB less RSS).
            // build-support/startup.order (generated: Benchmarks/memory/order_profile.py, `make order-file`)
            // lays the functions a running daemon executes side by side, so the 64–128 KiB runs the kernel maps around each
            // page touched hold little code that never runs; `--no-export-dynamic` undoes the
            // `-export-dynamic` of --static-swift-stdlib (43,000 symbols the loader would search at
            // start). Measured: BENCHMARKS.md "Memory".
            linkerSettings: [
                .unsafeFlags(
                    [
                        "-Xclang-linker", "--config=\(Context.packageDirectory)/Sources/pusher-mqtt-bridge/link-as-needed.cfg",
                        "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/build-support/startup.order",
                        "-Xlinker", "--no-warn-symbol-ordering",
                        "-Xlinker", "--no-export-dynamic",
                    ],
                    .when(platforms: [.linux]))
            ]
        ),

        // MARK: tests
        //
        // Unit targets (`…Tests`) run no server; the `…IntegrationTests` targets start a real mosquitto
        // and/or an in-process pusher-local. `swift test` runs them all.

        /// What the test targets share: the mosquitto launcher, the in-process pusher-local launcher,
        /// free loopback ports, `bridges.conf` fixtures, the manual clocks, waiting with a deadline.
        .target(
            name: "TestSupport",
            dependencies: [
                "BridgeCore", "PusherLocal", "PusherProtocol", "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "BackoffTests", dependencies: ["Backoff"], swiftSettings: swiftSettings),
        .testTarget(name: "LockingTests", dependencies: ["Locking"], swiftSettings: swiftSettings),
        .testTarget(name: "MQTTVocabularyTests", dependencies: ["MQTTVocabulary"], swiftSettings: swiftSettings),
        .testTarget(
            name: "PusherProtocolTests",
            // The three JSON views too: the conformance table runs against the tokenizer and each of them.
            dependencies: [
                "PusherProtocol", "PusherChannels", "PusherLocal", "BridgeCore",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PusherChannelsTests",
            dependencies: [
                "PusherChannels", "PusherLocal", "PusherProtocol", "Backoff", "Locking", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        /// PusherChannels against scripted servers and an in-process pusher-local.
        .testTarget(
            name: "PusherChannelsIntegrationTests",
            dependencies: [
                "PusherChannels", "PusherLocal", "PusherProtocol", "Backoff", "Locking", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PusherLocalTests",
            dependencies: [
                "PusherLocal", "PusherProtocol", "Locking", "PusherChannels", "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        /// pusher-local's server in process: WebSocket and HTTP API clients, TLS, webhooks to a receiver.
        .testTarget(
            name: "PusherLocalIntegrationTests",
            dependencies: [
                "PusherLocal", "PusherProtocol", "Locking", "PusherChannels", "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "WSCore", package: "swift-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        /// Publish throughput through the MosquittoClient wrapper (scripts/bench-mqtt.sh compares it with C).
        .executableTarget(
            name: "mqtt-bench",
            dependencies: ["MosquittoClient", "MQTTVocabulary", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        /// `make bench`'s WebSocket subscriber (Benchmarks/bridge/bench.py): counts, checks order and
        /// records latency of the events of one channel through our own PusherClient.
        .executableTarget(
            name: "pusher-bench-subscriber",
            dependencies: [
                "PusherChannels",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MosquittoClientTests",
            dependencies: [
                "MosquittoClient", "MQTTVocabulary", "Backoff", "Locking",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        /// MosquittoClient against a real mosquitto (TestSupport's launcher).
        .testTarget(
            name: "MosquittoClientIntegrationTests",
            dependencies: [
                "MosquittoClient", "MQTTVocabulary", "Backoff", "Locking", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BridgeDaemonTests",
            dependencies: [
                "BridgeDaemon", "BridgeCore", "Durability", "PusherChannels", "MQTTVocabulary", "Locking", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        /// `BridgeRuntime` and `Daemon` in the test process against a real mosquitto and an
        /// in-process pusher-local: start, both directions, reload, stop, broker and Pusher loss.
        .testTarget(
            name: "BridgeDaemonIntegrationTests",
            dependencies: [
                "BridgeDaemon", "BridgeCore", "PusherChannels", "PusherLocal", "MosquittoClient", "MQTTVocabulary", "Backoff",
                "Locking", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BridgeCoreTests",
            dependencies: [
                "BridgeCore", "MQTTVocabulary", "Backoff", "TestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DurabilityTests",
            dependencies: [
                "Durability", "BridgeVocabulary", "MQTTVocabulary",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// Benchmarks (ordo-one/benchmark) only when asked, so normal builds and CI do not build them:
//   BENCHMARKS=1 swift package --disable-sandbox benchmark --target BridgeCoreBenchmarks
if Context.environment["BENCHMARKS"] == "1" {
    package.dependencies.append(
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]))
    package.targets.append(
        .executableTarget(
            name: "BridgeCoreBenchmarks",
            dependencies: [
                "BridgeCore", "Durability",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/BridgeCoreBenchmarks",
            swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ))
}

// Fuzzing (libFuzzer, see Fuzz/README.md) only when asked, so normal builds and CI's `make test`
// never see it: `make fuzz` / `make fuzz-smoke` run scripts/fuzz.sh, which builds with
//   PUSHER_MQTT_BRIDGE_FUZZ=1 swift build --scratch-path .build-fuzz --product fuzz-parsers \
//     -Xlinker <toolchain>/usr/lib/clang/21/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a -Xlinker -lstdc++
// `-sanitize=fuzzer` cannot be used: SwiftPM's own `main` replaces libFuzzer's and the binary never
// fuzzes (docs/swift-stack.md); our main calls LLVMFuzzerRunDriver instead. Only our parsers' modules get
// AddressSanitizer and coverage instrumentation (the dependencies are built plainly, which keeps the
// build short and the coverage signal about our code).
if Context.environment["PUSHER_MQTT_BRIDGE_FUZZ"] == "1" {
    let fuzzInstrumentation: [SwiftSetting] = [
        .unsafeFlags([
            "-sanitize=address",
            "-sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp",
        ])
    ]
    let instrumented: Set<String> = ["Backoff", "PusherProtocol", "PusherChannels", "PusherLocal", "BridgeCore"]
    for target in package.targets where instrumented.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + fuzzInstrumentation
    }
    package.targets.append(contentsOf: [
        /// Declares libFuzzer's `LLVMFuzzerRunDriver` for Swift.
        .target(name: "CFuzzerDriver", path: "Fuzz/CFuzzerDriver"),
        /// Every fuzz target in one binary; the first argument picks it (`fuzz-parsers list`).
        .executableTarget(
            name: "fuzz-parsers",
            dependencies: [
                "CFuzzerDriver", "BridgeCore", "PusherChannels", "PusherLocal", "PusherProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Fuzz/fuzz-parsers",
            swiftSettings: swiftSettings + fuzzInstrumentation,
            linkerSettings: [.unsafeFlags(["-sanitize=address"])]
        ),
    ])
    package.products.append(.executable(name: "fuzz-parsers", targets: ["fuzz-parsers"]))
}
