import Testing

@testable import Durability

@Suite("Spool record format and CRC-32C")
struct SpoolRecordFormatTests {
    /// Bit-at-a-time CRC-32C, the definition, to check the table-driven version against.
    func referenceCRC32C(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    @Test("CRC-32C check values (RFC 3720 B.4)")
    func checkValues() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test("the sliced CRC equals the bit-at-a-time definition at every length and split point")
    func matchesReference() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = referenceCRC32C(bytes)
            #expect(CRC32C.checksum(bytes) == expected, "length \(length)")
            for split in 0...length {
                let first = CRC32C.checksum(Array(bytes[0..<split]))
                #expect(CRC32C.checksum(Array(bytes[split...]), continuing: first) == expected)
            }
        }
    }

    @Test("an encoded record has the documented layout")
    func layout() {
        let record = SpoolRecordFormat.encode(kind: .data, sequence: 0x0102_0304_0506_0708, payload: [0xAA, 0xBB])
        #expect(record.count == 22)
        #expect(Array(record[0..<4]) == [0x53, 0x50, 1, 0])
        #expect(Array(record[4..<8]) == [2, 0, 0, 0])
        #expect(Array(record[8..<16]) == [8, 7, 6, 5, 4, 3, 2, 1])
        let crc = CRC32C.checksum(Array(record[0..<16]) + [0xAA, 0xBB])
        #expect(
            Array(record[16..<20]) == [
                UInt8(crc & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8((crc >> 16) & 0xFF), UInt8(crc >> 24),
            ]
        )
        #expect(Array(record[20...]) == [0xAA, 0xBB])
    }

    @Test("scan reads data and acknowledgement records and checks the sequence")
    func scan() {
        var bytes = SpoolRecordFormat.encode(kind: .data, sequence: 7, payload: [1, 2, 3])
        bytes += SpoolRecordFormat.encode(kind: .acknowledgement, sequence: 5, payload: [])
        bytes += SpoolRecordFormat.encode(kind: .data, sequence: 8, payload: [])
        let scan = SpoolRecordFormat.scan(bytes, firstSequence: 7, maxPayloadBytes: 100)
        #expect(scan.stop == nil)
        #expect(
            scan.records == [
                .init(sequence: 7, payloadOffset: 20, payloadLength: 3),
                .init(sequence: 8, payloadOffset: 63, payloadLength: 0),
            ]
        )
        #expect(scan.highestAcknowledgement == 5)
        #expect(scan.nextSequence == 9)
        #expect(scan.validLength == bytes.count)

        let wrongStart = SpoolRecordFormat.scan(bytes, firstSequence: 6, maxPayloadBytes: 100)
        #expect(wrongStart.records.isEmpty)
        #expect(
            wrongStart.stop == .init(offset: 0, reason: .unexpectedSequence(expected: 6, found: 7), reachesEnd: false)
        )
    }

    @Test("an implausible length is damage, not an allocation")
    func implausibleLength() {
        var bytes = SpoolRecordFormat.encode(kind: .data, sequence: 1, payload: [1, 2, 3])
        bytes[7] = 0x7F  // length ≈ 2 GiB
        let scan = SpoolRecordFormat.scan(bytes, firstSequence: 1, maxPayloadBytes: 1 << 20)
        #expect(scan.stop?.reason == .implausibleLength(0x7F00_0003))
        #expect(scan.validLength == 0)
    }
}
