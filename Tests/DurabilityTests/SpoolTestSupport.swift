import Foundation
import Logging
import Testing

@testable import Durability

/// A fresh, unique directory under the system temp dir, removed when `body` returns or throws,
/// so tests run in parallel without sharing files.
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("spool-test-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

/// Deterministic payload for record `sequence`: its size and content depend on the sequence, so a
/// record returned under the wrong sequence or with shifted bytes is caught.
func payload(for sequence: UInt64, size: Int? = nil) -> [UInt8] {
    let length = size ?? Int(sequence % 37) * 3
    return (0..<length).map { UInt8(truncatingIfNeeded: Int(sequence) &* 31 &+ $0 &* 7) }
}

/// Every pending record of a spool, in order.
func allPending(_ spool: Spool) throws -> [SpoolRecord] {
    try spool.read(limit: Int.max)
}

/// Names of files in a directory, sorted.
func fileNames(in directory: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
}

/// The size of the file at `path`.
func fileSize(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.size] as? NSNumber)?.intValue ?? -1
}

/// The sum of the sizes of the `*.seg` files actually on disk (measured, not the spool's counter).
func segmentBytesOnDisk(_ directory: String) throws -> Int {
    try fileNames(in: directory).filter { $0.hasSuffix(".seg") }
        .reduce(0) { $0 + (try fileSize(directory + "/" + $1)) }
}

/// A small configuration for tests: no fsync (speed; fsync behaviour is not observable without
/// a power cut) unless a test asks otherwise, and every watermark advance written at once, so
/// a simulated crash keeps exactly the acknowledged prefix (the lazy watermark has its own tests
/// in `SpoolLazyAcknowledgementTests`).
func testConfiguration(
    segmentBytes: Int = 1 << 20,
    fsync: SpoolFsyncPolicy = .never
) -> SpoolConfiguration {
    SpoolConfiguration(fsync: fsync, segmentBytes: segmentBytes, maxPayloadBytes: 1 << 20, acknowledgementBatch: 1)
}

/// A logger that keeps the expected recovery warnings of damage tests out of the test output.
let quietLogger: Logger = {
    var logger = Logger(label: "spool-tests")
    logger.logLevel = .critical
    return logger
}()

extension Spool {
    /// Opens a spool with the quiet test logger.
    convenience init(directory: String, configuration: SpoolConfiguration) throws {
        try self.init(directory: directory, configuration: configuration, logger: quietLogger)
    }
}
