// mqtt-bench: publish throughput through MQTTClient, for scripts/bench-mqtt.sh.
//
//     mqtt-bench PORT COUNT QOS [PAYLOAD_BYTES=100] [IN_FLIGHT=1000] [PROTOCOL=5]
//
// Publishes COUNT messages to 127.0.0.1:PORT with `send` (bounded in-flight window, no task per
// message) and counts completions: QoS 1 = PUBACK received, QoS 0 = written to the socket (the
// same events the C baseline counts with on_publish). Prints one line:
//     swift qos=1 count=100000 seconds=2.345 rate=42643

import Foundation
import Logging
import MQTTVocabulary
import MosquittoClient

@main
enum MQTTBench {
    static func main() async {
        let arguments = CommandLine.arguments.dropFirst().map { Int($0) }
        guard arguments.count >= 3, let port = arguments[0], let count = arguments[1], let qosValue = arguments[2],
            let qos = MQTTQoS(rawValue: qosValue), count > 0
        else {
            FileHandle.standardError.write(Data("usage: mqtt-bench PORT COUNT QOS [PAYLOAD_BYTES] [IN_FLIGHT] [PROTOCOL]\n".utf8))
            exit(64)
        }
        let size = arguments.count > 3 ? (arguments[3] ?? 100) : 100
        let window = arguments.count > 4 ? (arguments[4] ?? 1000) : 1000
        let version: MQTTProtocolVersion = (arguments.count > 5 ? arguments[5] : 5) == 4 ? .v311 : .v5

        var logger = Logger(label: "mqtt-bench")
        logger.logLevel = .warning
        let configuration = MQTTConfiguration(
            host: "127.0.0.1", port: port, clientID: "swift-bench-\(getpid())", protocolVersion: version,
            cleanSession: true, maxInFlight: window)
        let client: MQTTClient
        do {
            client = try MQTTClient(configuration: configuration, logger: logger)
        } catch {
            FileHandle.standardError.write(Data("mqtt-bench: \(error)\n".utf8))
            exit(1)
        }
        client.start()
        // Woken by the state stream (not polled); gives up after 10 s.
        let connected = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await state in client.states {
                    switch state {
                    case .connected: return true
                    case .stopped: return false
                    case .idle, .connecting, .disconnected: continue
                    }
                }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(10))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        guard connected else {
            FileHandle.standardError.write(Data("mqtt-bench: not connected after 10 s: \(client.state)\n".utf8))
            exit(1)
        }

        let payload = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        let message = MQTTMessage(topic: "bench/swift", payload: payload, qos: qos)
        let completions = client.completions
        let counter = Task.detached { () -> Int in
            var done = 0
            var failed = 0
            for await completion in completions {
                if completion.error != nil { failed += 1 }
                done += 1
                if done == count { break }
            }
            return failed
        }
        // Publish from a nonisolated task: from the main actor every `send` would hop executors.
        let elapsed = await Task.detached { () -> Double in
            let start = ContinuousClock.now
            for _ in 0..<count {
                do {
                    try await client.send(message)
                } catch {
                    FileHandle.standardError.write(Data("mqtt-bench: publish failed: \(error)\n".utf8))
                    exit(1)
                }
            }
            _ = await counter.value
            return start.duration(to: .now).seconds
        }.value
        let failed = await counter.value
        print(
            "swift qos=\(qos.rawValue) count=\(count) seconds=\(String(format: "%.3f", elapsed)) rate=\(Int(Double(count) / elapsed))"
        )
        if failed > 0 {
            FileHandle.standardError.write(Data("mqtt-bench: \(failed) publishes failed\n".utf8))
        }
        await client.shutdown()
        exit(failed == 0 ? 0 : 1)
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
