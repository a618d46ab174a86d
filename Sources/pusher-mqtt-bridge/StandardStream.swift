#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's standard output or error, written straight to the file descriptor (no buffering,
/// as `FileHandle.standardError.write` did: the daemon links FoundationEssentials only, which has
/// no `FileHandle`).
enum StandardStream {
    /// File descriptor 1.
    case output
    /// File descriptor 2.
    case error

    /// Writes all of `text` (as UTF-8), retrying after a signal or a partial write; gives up
    /// silently on any other error (a closed stream has nobody left to tell).
    func write(_ text: String) {
        let descriptor: Int32 = self == .output ? 1 : 2
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                #if canImport(Glibc)
                    let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #else
                    let written = Darwin.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #endif
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
