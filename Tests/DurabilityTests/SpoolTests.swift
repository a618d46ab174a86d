import Foundation
import Testing

@testable import Durability

@Suite("Spool: append, read, acknowledge, reopen")
struct SpoolTests {
    @Test("a new spool starts at sequence 1 and returns appended records in order")
    func appendAndRead() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            #expect(
                spool.recovery
                    == SpoolRecoveryReport(
                        segmentsFound: 0,
                        pendingRecords: 0,
                        deliveredWatermark: 0,
                        nextSequence: 1,
                        damage: []
                    )
            )
            for sequence in 1...5 as ClosedRange<UInt64> {
                #expect(try spool.append(payload(for: sequence)) == sequence)
            }
            #expect(try allPending(spool) == (1...5).map { SpoolRecord(sequence: $0, payload: payload(for: $0)) })
            #expect(try spool.peek()?.sequence == 1)
            #expect(try spool.read(after: 2, limit: 2).map(\.sequence) == [3, 4])
            #expect(spool.pendingCount == 5)
            #expect(spool.pendingBytes == (1...5).reduce(0) { $0 + payload(for: $1).count })
            try spool.close()
        }
    }

    @Test("an empty payload is a valid record")
    func emptyPayload() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                try spool.append([])
                try spool.append([1])
                try spool.close()
            }
            let reopened = try Spool(directory: directory, configuration: testConfiguration())
            #expect(
                try allPending(reopened) == [
                    SpoolRecord(sequence: 1, payload: []), SpoolRecord(sequence: 2, payload: [1]),
                ]
            )
        }
    }

    @Test("acknowledged records are gone after reopening; the rest come back in order")
    func reopenAfterAcknowledge() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                for sequence in 1...10 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
                #expect(try spool.acknowledge(upTo: 4) == 4)
                #expect(try spool.acknowledge(5))
                #expect(spool.deliveredWatermark == 5)
                try spool.close()
            }
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            #expect(spool.recovery.deliveredWatermark == 5)
            #expect(spool.recovery.damage.isEmpty)
            #expect(try allPending(spool).map(\.sequence) == [6, 7, 8, 9, 10])
            #expect(try spool.append([42]) == 11)
        }
    }

    @Test("out-of-order acknowledgements: the watermark moves only over a gap-free prefix")
    func outOfOrderAcknowledgements() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration())
                for sequence in 1...6 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
                #expect(try spool.acknowledge(3))
                #expect(try spool.acknowledge(5))
                #expect(spool.deliveredWatermark == 0)
                // Acknowledged out of order: not returned again in this process.
                #expect(try allPending(spool).map(\.sequence) == [1, 2, 4, 6])
                #expect(spool.pendingCount == 4)
                #expect(try !spool.acknowledge(3), "a second acknowledgement is a no-op")
                #expect(try !spool.acknowledge(99), "a sequence never appended is refused")
                #expect(try spool.acknowledge(1))
                #expect(spool.deliveredWatermark == 1)
                #expect(try spool.acknowledge(2))
                // 3 was already acknowledged, so the watermark jumps over it to 3; 4 is pending.
                #expect(spool.deliveredWatermark == 3)
                // Drop without close: a crash. 5 was acknowledged only above the watermark.
            }
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            // At-least-once: 5 is delivered again, 4 and 6 never were.
            #expect(try allPending(spool).map(\.sequence) == [4, 5, 6])
        }
    }

    @Test("pending byte count follows appends and acknowledgements of every kind")
    func pendingBytes() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            for sequence in 1...6 as ClosedRange<UInt64> {
                try spool.append(payload(for: sequence, size: Int(sequence) * 10))
            }
            #expect(spool.pendingBytes == 210)
            try spool.acknowledge(4)
            #expect(spool.pendingBytes == 170)
            try spool.acknowledge(upTo: 5)  // 1, 2, 3, 5 newly delivered
            #expect(spool.pendingBytes == 60)
            #expect(spool.pendingCount == 1)
        }
    }

    @Test("acknowledge(upTo:) counts only newly delivered records and clamps to the last sequence")
    func acknowledgeUpToCounts() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            for sequence in 1...5 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
            try spool.acknowledge(2)
            #expect(try spool.acknowledge(upTo: 100) == 4)
            #expect(spool.deliveredWatermark == 5)
            #expect(try spool.acknowledge(upTo: 100) == 0)
            #expect(try spool.peek() == nil)
        }
    }

    @Test("a payload over the limit is refused with a clear error and does not disturb the log")
    func payloadTooLarge() throws {
        try withTemporaryDirectory { directory in
            let configuration = SpoolConfiguration(fsync: .never, segmentBytes: 4096, maxPayloadBytes: 100)
            let spool = try Spool(directory: directory, configuration: configuration)
            try spool.append([1, 2, 3])
            let error = try #require(throws: SpoolError.self) { try spool.append([UInt8](repeating: 0, count: 101)) }
            #expect(error.isPayloadTooLarge)
            #expect(error.description.contains("101 bytes exceeds the limit of 100"))
            #expect(try spool.append([4]) == 2)
        }
    }

    @Test("a second spool on the same directory is refused while the first is open")
    func directoryLock() throws {
        try withTemporaryDirectory { directory in
            let first = try Spool(directory: directory, configuration: testConfiguration())
            let error = try #require(throws: SpoolError.self) {
                _ = try Spool(directory: directory, configuration: testConfiguration())
            }
            #expect(error.description.contains("in use"))
            try first.close()
            let second = try Spool(directory: directory, configuration: testConfiguration())
            try second.close()
        }
    }

    @Test("use after close throws instead of crashing")
    func useAfterClose() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            try spool.close()
            #expect(throws: SpoolError.self) { try spool.append([1]) }
            #expect(throws: SpoolError.self) { try spool.read(limit: 1) }
            #expect(throws: SpoolError.self) { try spool.acknowledge(1) }
        }
    }

    @Test(
        "invalid configurations are rejected with a message",
        arguments: [
            SpoolConfiguration(fsync: .batch(records: 0)),
            SpoolConfiguration(segmentBytes: 0),
        ]
    )
    func invalidConfiguration(configuration: SpoolConfiguration) throws {
        try withTemporaryDirectory { directory in
            let error = try #require(throws: SpoolError.self) {
                _ = try Spool(directory: directory, configuration: configuration)
            }
            #expect(error.description.contains("invalid configuration"))
        }
    }

    @Test(
        "every fsync policy stores and recovers the same records",
        arguments: [
            SpoolFsyncPolicy.always, .batch(records: 3), .never,
        ]
    )
    func fsyncPolicies(policy: SpoolFsyncPolicy) throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(
                    directory: directory,
                    configuration: testConfiguration(segmentBytes: 256, fsync: policy)
                )
                for sequence in 1...20 as ClosedRange<UInt64> { try spool.append(payload(for: sequence)) }
                try spool.acknowledge(upTo: 7)
                try spool.sync()
            }
            let spool = try Spool(
                directory: directory,
                configuration: testConfiguration(segmentBytes: 256, fsync: policy)
            )
            #expect(try allPending(spool) == (8...20).map { SpoolRecord(sequence: $0, payload: payload(for: $0)) })
        }
    }

    @Test("records larger than a segment get a segment of their own")
    func recordLargerThanSegment() throws {
        try withTemporaryDirectory { directory in
            do {
                let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 64))
                try spool.append(payload(for: 1, size: 10))
                try spool.append(payload(for: 2, size: 500))
                try spool.append(payload(for: 3, size: 10))
            }
            #expect(try fileNames(in: directory).filter { $0.hasSuffix(".seg") }.count == 3)
            let spool = try Spool(directory: directory, configuration: testConfiguration(segmentBytes: 64))
            #expect(try allPending(spool).map(\.payload.count) == [10, 500, 10])
        }
    }
}

@Suite("Spool: edge values")
struct SpoolEdgeTests {
    @Test("reading after the largest sequence value returns nothing instead of overflowing")
    func readAfterMax() throws {
        try withTemporaryDirectory { directory in
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            try spool.append([1])
            #expect(try spool.read(after: .max, limit: 5).isEmpty)
            #expect(try spool.read(after: 0, limit: 0).isEmpty)
            #expect(try !spool.acknowledge(.max))
            #expect(try spool.acknowledge(upTo: .max) == 1)
        }
    }
}

@Suite("Spool: directory layout")
struct SpoolLayoutTests {
    @Test("one directory per bridge and direction under state_dir, created with its parents")
    func conventionalDirectory() throws {
        #expect(
            Spool.directory(stateDirectory: "/var/lib/pusher-mqtt-bridge/", bridge: "factory", direction: "mqtt-to-pusher")
                == "/var/lib/pusher-mqtt-bridge/factory/mqtt-to-pusher.spool"
        )
        try withTemporaryDirectory { stateDirectory in
            let directory = Spool.directory(stateDirectory: stateDirectory, bridge: "factory", direction: "pusher-to-mqtt")
            let spool = try Spool(directory: directory, configuration: testConfiguration())
            try spool.append([1])
            #expect(try fileNames(in: directory) == ["00000000000000000001.seg", "lock"])
        }
    }
}
