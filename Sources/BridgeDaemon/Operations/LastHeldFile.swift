import BridgeCore
import Glibc

/// Reads and writes `<state_dir>/<bridge>/pusher_last_held` (``LastHeldRecord``): when each channel
/// was last held, for the gap a restart leaves (docs/pusher-merge.md, "Gap records"). Written by
/// housekeeping every few seconds, whole, to a temporary file renamed over the old one (a crash
/// leaves the old file or the new one, never half of one).
struct LastHeldFile: Sendable {
    let path: String

    /// The file of `bridge` under `stateDirectory` (the bridge's spool folder's parent).
    init(stateDirectory: String, bridge: String) {
        let base = stateDirectory.hasSuffix("/") ? String(stateDirectory.dropLast()) : stateDirectory
        path = base + "/" + bridge + "/" + LastHeldRecord.fileName
    }

    /// The times kept, and the lines not understood; empty when there is no file (a first start).
    func read() -> (times: [String: UTCTimestamp], badLines: Int) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return ([:], 0) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return ([:], 1) }
        return LastHeldRecord.parse(text)
    }

    /// Replaces the file with `times`. Returns the error text when it could not.
    func write(_ times: [String: UTCTimestamp]) -> String? {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return "\(temporary): \(String(cString: strerror(errno)))" }
        let bytes = Array(LastHeldRecord.render(times).utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let problem = String(cString: strerror(errno))
                close(descriptor)
                unlink(temporary)
                return "\(temporary): \(problem)"
            }
            written += count
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else { return "\(path): \(String(cString: strerror(errno)))" }
        return nil
    }
}
