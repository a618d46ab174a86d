// pusher-bench-subscriber: the receiving end of `make bench` on the Pusher side
// (Benchmarks/bridge/bench.py). Our own PusherChannels.PusherClient, subscribed to one public
// channel of a server without TLS, counting events whose data is
// {"seq":N,"sent_at_ns":T,...} (pusher-local's generated stream, or c_pub's payloads through
// the bridge).
//
//     pusher-bench-subscriber PORT KEY CHANNEL EVENT EXPECT IDLE_SECONDS TOTAL_SECONDS LATENCY_FILE
//
// The same contract as Benchmarks/bridge/c_sub.c, so the driver treats both alike:
// - prints "ready" once the subscription succeeded;
// - stops when EXPECT distinct sequence numbers arrived, after IDLE_SECONDS without an event
//   (once one arrived), or after TOTAL_SECONDS;
// - writes one latency per event (wall clock at arrival - sent_at_ns, Int64 ns, native byte
//   order) to LATENCY_FILE and prints one JSON line with received, unique, duplicates,
//   reordered, missing, unparsed, out_of_range, seconds (first to last arrival) and rate
//   ((received - 1) / seconds).
// Events are taken in a `bind` callback (called in order on the client's reading path, no
// stream or task per event), so the subscriber costs little next to the bridge it measures.

import Foundation
import Locking
import Logging
import PusherChannels

/// What arrived so far: counts, the sequence numbers seen and one latency per event.
struct Tally: ~Copyable {
    var expect: Int
    var seen: [Bool]
    var received = 0
    var unique = 0
    var duplicates = 0
    var reordered = 0
    var unparsed = 0
    var outOfRange = 0
    /// The highest sequence seen per channel (sequence i travels on channel i % channels).
    var highest: [Int]
    var first: ContinuousClock.Instant?
    var last: ContinuousClock.Instant?
    var latencies: [Int64] = []

    init(expect: Int, channels: Int) {
        self.expect = expect
        self.highest = Array(repeating: -1, count: channels)
        self.seen = Array(repeating: false, count: expect)
        latencies.reserveCapacity(min(expect, 10_000_000))
    }

    /// One event's data arrived at `now` (wall clock `realNanos`).
    mutating func record(_ data: String?, now: ContinuousClock.Instant, realNanos: Int64) {
        received += 1
        if first == nil { first = now }
        last = now
        guard let data, let seq = Self.integer(after: "\"seq\":", in: data),
            let sent = Self.integer(after: "\"sent_at_ns\":", in: data)
        else {
            unparsed += 1
            return
        }
        if seq < 0 || seq >= expect {
            outOfRange += 1
        } else if seen[Int(seq)] {
            duplicates += 1
        } else {
            seen[Int(seq)] = true
            unique += 1
        }
        // Order is promised per channel only (docs/contract.md §5.6).
        let lane = Int(seq < 0 ? 0 : seq) % highest.count
        if seq < highest[lane] { reordered += 1 } else { highest[lane] = Int(seq) }
        latencies.append(realNanos - sent)
    }

    /// The decimal integer right after the first `key` in `text`.
    static func integer(after key: StaticString, in text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            let keyBytes = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
            guard bytes.count > keyBytes.count else { return nil }
            var i = 0
            while i + keyBytes.count < bytes.count {
                if bytes[i] == keyBytes[0], memcmp(bytes.baseAddress! + i, keyBytes.baseAddress!, keyBytes.count) == 0 {
                    var j = i + keyBytes.count
                    var value: Int64 = 0
                    var digits = 0
                    while j < bytes.count, bytes[j] >= UInt8(ascii: "0"), bytes[j] <= UInt8(ascii: "9"), digits < 19 {
                        value = value * 10 + Int64(bytes[j] - UInt8(ascii: "0"))
                        j += 1
                        digits += 1
                    }
                    return digits > 0 ? value : nil
                }
                i += 1
            }
            return nil
        }
    }
}

/// The tally shared by the client's callback and the main task.
final class SharedTally: Sendable {
    let state: Locked<Tally>

    init(expect: Int, channels: Int) { state = Locked(Tally(expect: expect, channels: channels)) }
}

func realtimeNanos() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// One line on stdout, written at once (the driver waits for it; no buffering to flush).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("pusher-bench-subscriber: \(message)\n".utf8))
    exit(code)
}

/// The program: parse arguments, subscribe, count until done, report.
@main
enum PusherBenchSubscriber {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count == 8 || arguments.count == 9, let port = Int(arguments[0]), let expect = Int(arguments[4]), expect > 0,
            let idle = Double(arguments[5]), idle > 0, let total = Double(arguments[6]), total > 0,
            let channelCount = arguments.count == 9 ? Int(arguments[8]) : 1, channelCount >= 1,
            channelCount == 1 || arguments[2].contains("%d")
        else {
            fail(
                "usage: pusher-bench-subscriber PORT KEY CHANNEL EVENT EXPECT IDLE_SECONDS TOTAL_SECONDS LATENCY_FILE [CHANNELS]"
                    + " (with CHANNELS > 1, CHANNEL holds one %d)", code: 64)
        }
        let (key, channelName, eventName, latencyPath) = (arguments[1], arguments[2], arguments[3], arguments[7])

        var logger = Logger(label: "pusher-bench-subscriber")
        logger.logLevel = .warning
        let client = PusherClient(
            options: PusherClientOptions(key: key, host: .host("127.0.0.1", port: port), encrypted: false, activityTimeout: .seconds(60)),
            logger: logger)
        let tally = SharedTally(expect: expect, channels: channelCount)
        let clock = ContinuousClock()
        client.bind(eventName: eventName) { event in
            let now = clock.now
            let real = realtimeNanos()
            tally.state.withLock { $0.record(event.data, now: now, realNanos: real) }
        }

        let runner = Task { try await client.run() }
        client.connect()
        let names = channelCount == 1 ? [channelName] : (0..<channelCount).map { channelName.replacingOccurrences(of: "%d", with: "\($0)") }
        let channels = names.map { client.subscribe($0) }
        let subscribeDeadline = clock.now + .seconds(10)
        while !channels.allSatisfy(\.isSubscribed) {
            if clock.now > subscribeDeadline { fail("not subscribed to \(names) after 10 s (state \(client.connectionState))") }
            try? await Task.sleep(for: .milliseconds(10))
        }
        say("ready")

        let start = clock.now
        while true {
            let (done, last) = tally.state.withLock { ($0.unique >= $0.expect, $0.last) }
            let now = clock.now
            if done || now - start > .seconds(total) { break }
            if let last, now - last > .seconds(idle) { break }
            try? await Task.sleep(for: .milliseconds(20))
        }

        let summary = tally.state.withLock { tally -> String in
            var seconds = 0.0
            if let first = tally.first, let last = tally.last, tally.received > 1 {
                let span = (last - first).components
                seconds = Double(span.seconds) + Double(span.attoseconds) / 1e18
            }
            let rate = seconds > 0 ? Double(tally.received - 1) / seconds : 0
            let written = tally.latencies.withUnsafeBytes { bytes in
                FileManager.default.createFile(atPath: latencyPath, contents: Data(bytes))
            }
            if !written { fail("cannot write \(latencyPath)") }
            return "{\"received\":\(tally.received),\"unique\":\(tally.unique),\"duplicates\":\(tally.duplicates),"
                + "\"reordered\":\(tally.reordered),\"missing\":\(tally.expect - tally.unique),\"unparsed\":\(tally.unparsed),"
                + "\"out_of_range\":\(tally.outOfRange),\"seconds\":\(seconds),\"rate\":\(rate)}"
        }
        say(summary)
        await client.disconnectAndWait(timeout: .seconds(1))
        runner.cancel()
        exit(0)
    }
}
