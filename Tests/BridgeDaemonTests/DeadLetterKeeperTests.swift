import BridgeCore
import Durability
import Foundation
import Logging
import Testing

@testable import BridgeDaemon

/// A bridge's dead-letter store at work, on real files, without sockets (docs/contract.md §8.3):
/// letters kept in order, taken once for a redrive, removed, purged; what the command line prints.
@Suite struct DeadLetterKeeperTests {
    static func folder() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dead-letters-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    static func letter(_ index: Int, reason: DeadLetterReason = .invalidChannelName("x:y", problem: "':' is not allowed")) -> DeadLetter {
        DeadLetter(
            rule: "rooms", reason: reason, source: .mqtt(topic: "sensors/\(index)/t:c"), payload: Array("{\"seq\":\(index)}".utf8), qos: 1,
            retain: false)
    }

    @Test func keptLettersAreTakenOnceRemovedAndPurged() async throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let metrics = BridgeMetrics()
        let keeper = DeadLetterKeeper(
            bridge: "demo", stateDirectory: directory, maxLetters: 3, metrics: metrics, logger: Logger(label: "test"))
        let owner = Task { await keeper.run() }
        for index in 0..<4 { keeper.keep(Self.letter(index), direction: .mqttToPusher, atMillis: 1_700_000_000_000) }
        keeper.keep(
            Self.letter(9, reason: .rejectedByPusher(status: 400, body: "no")), direction: .mqttToPusher, atMillis: 1_700_000_000_001)

        // The bound of 3: the two oldest evicted.
        let taken = await keeper.take(.all(bridge: nil))
        #expect(taken.letters.map(\.id) == [3, 4, 5])
        #expect(taken.letters.first?.message == .mqtt(topic: "sensors/2/t:c", qos: 1, retain: false))
        #expect(taken.letters.first?.code == "invalid_channel")
        // A second redrive leaves them alone until the first releases them.
        let again = await keeper.take(.ids([DeadLetterID(bridge: "demo", number: 3), DeadLetterID(bridge: "demo", number: 42)]))
        #expect(again.letters.isEmpty && again.busy == 1 && again.missing == [42])
        // While a redrive runs, a refusal of the Pusher API is noted for it, asked once.
        keeper.rejected([17])
        #expect(await keeper.wasRejected(17))
        #expect(await !keeper.wasRejected(17))
        keeper.released([3, 4, 5])
        keeper.rejected([18])  // no redrive runs: not noted
        #expect(await !keeper.wasRejected(18))
        #expect(await keeper.remove([3]) == 1)
        #expect(await keeper.purge(.code("invalid_channel", bridge: nil)).letters.map(\.id) == [4])
        #expect(await keeper.purge(.all(bridge: "other")).letters.isEmpty)
        keeper.finish()
        await owner.value
        #expect(await keeper.take(.all(bridge: nil)).letters.isEmpty)  // stopped: nothing, no hang

        let store = try DeadLetterStore(directory: DeadLetterStore.directory(stateDirectory: directory, bridge: "demo"), maxLetters: 3)
        #expect(store.ids == [5])
        #expect(try store.letter(5)?.code == "rejected")
        let text = String(decoding: metrics.render(), as: UTF8.self)
        #expect(text.contains("pusher_mqtt_bridge_dead_letters_evicted_total{bridge=\"demo\"} 2"))
        #expect(text.contains("pusher_mqtt_bridge_dead_letters_stored{bridge=\"demo\"} 1"))
    }

    @Test func aStoreHeldByAnotherProcessAtStartIsTakenOnceItIsFree() async throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = DeadLetterStore.directory(stateDirectory: directory, bridge: "demo")
        var other: DeadLetterStore? = try DeadLetterStore(directory: path, maxLetters: 10)  // a `purge` from the command line
        let keeper = DeadLetterKeeper(
            bridge: "demo", stateDirectory: directory, maxLetters: 10, metrics: BridgeMetrics(), logger: Logger(label: "test"))
        let owner = Task { await keeper.run() }
        #expect(await keeper.take(.all(bridge: nil)).letters.isEmpty)
        #expect(other != nil)
        other = nil
        keeper.sync()  // housekeeping's next round
        keeper.keep(Self.letter(1), direction: .mqttToPusher, atMillis: 0)
        #expect(await keeper.take(.all(bridge: nil)).letters.map(\.id) == [1])
        keeper.finish()
        await owner.value
    }

    @Test func theCommandLineShowsEveryFieldAsJSON() throws {
        var stored = DeadLetterKeeper.stored(Self.letter(1), direction: .mqttToPusher, bridge: "demo", atMillis: 1_700_000_000_000)
        stored.id = 7
        let line = DeadLetterFiles.jsonLine(.init(id: DeadLetterID(bridge: "demo", number: 7), stored: stored))
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["id"] as? String == "demo:7")
        #expect(object["bridge"] as? String == "demo" && object["rule"] as? String == "rooms")
        #expect(object["code"] as? String == "invalid_channel")
        #expect(object["time"] as? String == "2023-11-14T22:13:20.000Z")
        #expect(object["topic"] as? String == "sensors/1/t:c" && object["qos"] as? Int == 1)
        #expect(object["payload"] as? String == "{\"seq\":1}")
        let event = DeadLetterKeeper.stored(
            DeadLetter(rule: "r", reason: .invalidUTF8, source: .pusher(channel: "c", event: "e"), payload: [0xFF], userID: "u"),
            direction: .pusherToMQTT, bridge: "demo", atMillis: 0)
        let eventLine = DeadLetterFiles.jsonLine(.init(id: DeadLetterID(bridge: "demo", number: 8), stored: event))
        #expect(eventLine.contains("\"channel\":\"c\",\"event\":\"e\",\"user_id\":\"u\",\"payload_base64\":\"/w==\""))
        // A redriven letter is the message as it came.
        #expect(DeadLetterKeeper.redriven(event) == .pusher(channel: "c", event: "e", data: "\u{FFFD}", userID: "u"))
    }
}
