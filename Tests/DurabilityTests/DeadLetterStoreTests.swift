import Foundation
import Testing

@testable import Durability

/// The dead-letter store (docs/contract.md §8.3) against real files: kept across a reopen, bounded
/// with the evictions counted, a torn or damaged record skipped and counted, removal for good.
@Suite("DeadLetterStore: kept, bounded, crash-safe")
struct DeadLetterStoreTests {
    func letter(_ index: Int, pusher: Bool = false) -> StoredDeadLetter {
        StoredDeadLetter(
            bridge: "factory", rule: "rule\(index % 3)", code: "invalid_channel", reason: "rendered channel \"x y\" is invalid",
            timeMillis: 1_700_000_000_000 + Int64(index),
            message: pusher
                ? .pusher(channel: "private-c\(index)", event: "e", userID: index % 2 == 0 ? "u\(index)" : nil)
                : .mqtt(topic: "sensors/\(index)", qos: index % 3, retain: index % 2 == 0),
            payload: Array("payload \(index) é".utf8) + [0xFF])
    }

    func logPath(_ directory: String) -> String { DeadLetterStore.logPath(directory) }

    @Test func appendedLettersSurviveAReopenWithEveryField() throws {
        try withTemporaryDirectory { directory in
            var written: [StoredDeadLetter] = []
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                for index in 0..<6 {
                    var expected = letter(index, pusher: index >= 3)
                    expected.id = try store.append(expected)
                    written.append(expected)
                }
                #expect(written.map(\.id) == [1, 2, 3, 4, 5, 6])
                #expect(try store.letters() == written)
            }
            let store = try DeadLetterStore(directory: directory, maxLetters: 100)
            #expect(try store.letters() == written)
            #expect(store.recovery == .init())
            #expect(try DeadLetterStore.read(directory: directory).letters == written)
        }
    }

    @Test func theBoundEvictsTheOldestAndCountsThem() throws {
        try withTemporaryDirectory { directory in
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 3)
                for index in 0..<5 { try store.append(letter(index)) }
                #expect(store.ids == [3, 4, 5])
                #expect(store.evicted == 2)
            }
            // A lower bound at the next start evicts at once, and ids are never reused.
            let store = try DeadLetterStore(directory: directory, maxLetters: 2)
            #expect(store.ids == [4, 5])
            #expect(store.evicted == 1)
            #expect(try store.append(letter(9)) == 6)
        }
    }

    @Test func aTornLastRecordIsCutOffAndCountedAtEveryLength() throws {
        try withTemporaryDirectory { directory in
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                for index in 0..<3 { try store.append(letter(index)) }
            }
            let whole = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath(directory))))
            let lastStart =
                whole.count
                - (DeadLetterRecord.letter(
                    {
                        var l = letter(2); l.id = 3; return l
                    }()
                ).encoded().count + 20)
            for cut in lastStart..<whole.count {
                try Data(whole[..<cut]).write(to: URL(fileURLWithPath: logPath(directory)))
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                #expect(store.ids == [1, 2], "cut at \(cut)")
                #expect(store.recovery.tornRecords == (cut == lastStart ? 0 : 1))
                #expect(try fileSize(logPath(directory)) == lastStart)
            }
            // The next letter after a torn one takes the torn one's place cleanly.
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                #expect(try store.append(letter(7)) == 3)
            }
            let store = try DeadLetterStore(directory: directory, maxLetters: 100)
            #expect(store.ids == [1, 2, 3])
            #expect(store.recovery == .init())
        }
    }

    @Test func aDamagedRecordInTheMiddleIsSkippedAndCountedAndTheRestKept() throws {
        try withTemporaryDirectory { directory in
            var sizes: [Int] = []
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                for index in 0..<4 {
                    let before = try fileSize(logPath(directory))
                    try store.append(letter(index))
                    sizes.append(try fileSize(logPath(directory)) - before)
                }
            }
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath(directory))))
            bytes[sizes[0] + 30] ^= 0x40  // inside the second letter's payload
            try Data(bytes).write(to: URL(fileURLWithPath: logPath(directory)))
            #expect(try DeadLetterStore.read(directory: directory).recovery.skippedRecords == 1)
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                #expect(store.ids == [1, 3, 4])
                #expect(store.recovery.skippedRecords == 1)
                #expect(
                    try store.letter(3)
                        == {
                            var l = letter(2); l.id = 3; return l
                        }())
            }
            // Opening rewrote the log clean: the damage is counted once.
            let store = try DeadLetterStore(directory: directory, maxLetters: 100)
            #expect(store.recovery == .init())
            #expect(store.ids == [1, 3, 4])
            #expect(try store.append(letter(5)) == 5)
        }
    }

    @Test func removedLettersStayRemovedAndIdsAreNeverReused() throws {
        try withTemporaryDirectory { directory in
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                for index in 0..<3 { try store.append(letter(index)) }
                #expect(try store.remove([2, 3, 42]) == [2, 3])
                #expect(try store.remove([2]) == [])
            }
            let store = try DeadLetterStore(directory: directory, maxLetters: 100)
            #expect(store.ids == [1])
            #expect(try store.append(letter(8)) == 4)
            #expect(try DeadLetterStore.read(directory: directory).letters.map(\.id) == [1, 4])
        }
    }

    @Test func compactionKeepsTheLiveLettersAndTheNextID() throws {
        try withTemporaryDirectory { directory in
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 10)
                for index in 0..<3000 { try store.append(letter(index)) }
                #expect(store.count == 10)
                #expect(store.evicted == 2990)
                // Compaction ran: the log holds far fewer than 3,000 letters' bytes.
                #expect(try fileSize(logPath(directory)) < 3000 * 60)
                try store.remove(Array(store.ids.prefix(9)))
                try store.compact()
            }
            let store = try DeadLetterStore(directory: directory, maxLetters: 10)
            #expect(store.ids == [3000])
            #expect(try store.append(letter(1)) == 3001)
        }
    }

    @Test func aRedrivesSubmissionsSurviveAReopenAndGoWithTheirLetter() throws {
        try withTemporaryDirectory { directory in
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                for index in 0..<3 { try store.append(letter(index)) }
                try store.markSubmitted(1, direction: 1, sequence: 41)
                try store.markSubmitted(2, direction: 0, sequence: 7)
                try store.markSubmitted(2, direction: 1, sequence: 42)
                try store.markSubmitted(99, direction: 1, sequence: 1)  // not kept: ignored
                try store.remove([1])
            }
            do {
                let store = try DeadLetterStore(directory: directory, maxLetters: 100)
                #expect(store.submitted.map(\.id) == [2])
                #expect(
                    store.submitted.first?.submissions == [.init(direction: 0, sequence: 7), .init(direction: 1, sequence: 42)])
                try store.compact()
            }
            let store = try DeadLetterStore(directory: directory, maxLetters: 100)
            #expect(store.ids == [2, 3])
            #expect(store.submitted.map(\.id) == [2])
            try store.remove([2])
            #expect(store.submitted.isEmpty)
            #expect(try DeadLetterStore.read(directory: directory).letters.map(\.id) == [3])
        }
    }

    @Test func oneWriterAtATimeButReadersAnyTime() throws {
        try withTemporaryDirectory { directory in
            let store = try DeadLetterStore(directory: directory, maxLetters: 10)
            try store.append(letter(0))
            #expect(throws: SpoolError.self) { try DeadLetterStore(directory: directory, maxLetters: 10) }
            #expect(try DeadLetterStore.read(directory: directory).letters.count == 1)
            #expect(try DeadLetterStore.read(directory: directory + "/missing").letters.isEmpty)
        }
    }

    @Test func recordsRoundTripAndGarbageDecodesToNil() {
        for index in 0..<6 {
            let record = DeadLetterRecord.letter(letter(index, pusher: index % 2 == 0))
            #expect(DeadLetterRecord.decode(record.encoded()) == record)
        }
        #expect(DeadLetterRecord.decode(DeadLetterRecord.removal([1, 5, 9]).encoded()) == .removal([1, 5, 9]))
        #expect(DeadLetterRecord.decode(DeadLetterRecord.nextID(77).encoded()) == .nextID(77))
        let submitted = DeadLetterRecord.submitted(id: 5, direction: 1, sequence: 1 << 40)
        #expect(DeadLetterRecord.decode(submitted.encoded()) == submitted)
        let valid = DeadLetterRecord.letter(letter(1)).encoded()
        for cut in 0..<valid.count { #expect(DeadLetterRecord.decode(Array(valid[..<cut])) == nil) }
        #expect(DeadLetterLog.scan([0x53, 0x50, 1, 0, 9, 9, 9]).tornTail)
    }
}
