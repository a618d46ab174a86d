#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why the control socket cannot be served or reached: what was being done, where, and the
/// system's reason.
public struct ControlSocketError: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var code: Int32

    /// Nothing answered at the path (no socket, nobody listening): the request was not sent.
    public var isConnectFailure: Bool { operation == "connect to" || operation == "socket for" }

    public var description: String {
        "\(operation) \(path): \(String(cString: strerror(code)))"
    }
}

/// The system calls of the control socket (docs/contract.md §8.3), shared by the daemon (listen)
/// and the command line (connect). A path longer than `sun_path` (107 bytes) is reached through
/// its directory: a descriptor of the directory and the name `/proc/self/fd/N/NAME`, which the
/// kernel resolves like the long path (no `chdir`, which would touch every thread).
public enum ControlSocketIO {
    /// The most bytes of a path `sun_path` holds (108 with its NUL).
    static let sunPathLimit = 107

    /// A listening socket at `path`, mode 0600. A stale socket file (no process answers on it) is
    /// replaced; one a live process serves is left alone (an error: another daemon has it).
    public static func listen(path: String) throws(ControlSocketError) -> CInt {
        if access(path, F_OK) == 0 {
            if let probe = try? connect(path: path) {
                close(probe)
                throw ControlSocketError(operation: "another process serves", path: path, code: EADDRINUSE)
            }
            if unlink(path) != 0 { throw ControlSocketError(operation: "remove the stale socket", path: path, code: errno) }
        }
        let fd = try makeSocket(path: path)
        do throws(ControlSocketError) {
            try withAddress(path) { (address, length) throws(ControlSocketError) in
                if bind(fd, address, length) != 0 { throw ControlSocketError(operation: "bind", path: path, code: errno) }
            }
            // Before listen(): until then nobody can connect, so no one connects while it is 0666 & ~umask.
            if chmod(path, 0o600) != 0 { throw ControlSocketError(operation: "chmod 0600", path: path, code: errno) }
            if Glibc.listen(fd, 16) != 0 { throw ControlSocketError(operation: "listen", path: path, code: errno) }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// A socket connected to the one at `path`.
    public static func connect(path: String) throws(ControlSocketError) -> CInt {
        let fd = try makeSocket(path: path)
        do throws(ControlSocketError) {
            try withAddress(path) { (address, length) throws(ControlSocketError) in
                while Glibc.connect(fd, address, length) != 0 {
                    if errno == EINTR { continue }
                    throw ControlSocketError(operation: "connect to", path: path, code: errno)
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    private static func makeSocket(path: String) throws(ControlSocketError) -> CInt {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlSocketError(operation: "socket for", path: path, code: errno) }
        return fd
    }

    /// Calls `body` with the address of `path`, through its directory when the path is too long.
    static func withAddress(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) throws(ControlSocketError) -> Void
    ) throws(ControlSocketError) {
        var name = path
        var directory: CInt = -1
        defer { if directory >= 0 { close(directory) } }
        if path.utf8.count > sunPathLimit {
            let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
            let parent = slash.map { String(path[..<$0]) } ?? "."
            let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
            directory = open(parent.isEmpty ? "/" : parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard directory >= 0 else { throw ControlSocketError(operation: "open the directory of", path: path, code: errno) }
            name = "/proc/self/fd/\(directory)/\(base)"
            guard name.utf8.count <= sunPathLimit else {
                throw ControlSocketError(
                    operation: "socket name too long (over 107 bytes in its directory):", path: path, code: ENAMETOOLONG)
            }
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.size)
        try withUnsafePointer(to: &address) { (pointer) throws(ControlSocketError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (raw) throws(ControlSocketError) in try body(raw, length) }
        }
    }

    /// Sends one request to the daemon at `path` and returns its reply line (the command line's
    /// side). Waits up to `timeoutSeconds` for the reply.
    public static func exchange(_ request: String, path: String, timeoutSeconds: Int) throws(ControlSocketError) -> String {
        let fd = try connect(path: path)
        defer { close(fd) }
        guard writeAll(fd, Array(request.utf8)) else { throw ControlSocketError(operation: "send to", path: path, code: errno) }
        _ = shutdown(fd, Int32(SHUT_WR))
        setReadTimeout(fd, seconds: timeoutSeconds)
        guard let reply = readLine(fd, limit: 1 << 20), !reply.isEmpty else {
            throw ControlSocketError(
                operation: "no reply (timed out or the daemon stopped) from", path: path, code: errno == 0 ? ETIMEDOUT : errno)
        }
        return String(decoding: reply, as: UTF8.self)
    }

    /// Sets how long a read may block (`SO_RCVTIMEO`).
    public static func setReadTimeout(_ fd: CInt, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Reads up to the first `\n` (included) or the end; nil on an error or a timeout. More than
    /// `limit` bytes without a newline returns what was read (the parser refuses it).
    public static func readLine(_ fd: CInt, limit: Int) -> [UInt8]? {
        var line: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while line.count <= limit {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return line.isEmpty ? nil : line
            }
            if count == 0 { return line }
            if let newline = chunk[0..<count].firstIndex(of: UInt8(ascii: "\n")) {
                line.append(contentsOf: chunk[0...newline])
                return line
            }
            line.append(contentsOf: chunk[0..<count])
        }
        return line
    }

    /// Writes all of `bytes` (no SIGPIPE when the peer left); false on an error.
    @discardableResult
    public static func writeAll(_ fd: CInt, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                return false
            }
            done += count
        }
        return true
    }

    /// Stops `accept` on a listening socket (from another thread), without closing it.
    static func stopAccepting(_ fd: CInt) { _ = shutdown(fd, Int32(SHUT_RDWR)) }

    /// Removes the socket file (the daemon stops).
    static func remove(_ path: String) { _ = unlink(path) }

    /// Closes a descriptor.
    public static func close(_ fd: CInt) { _ = Glibc.close(fd) }

    /// Accepts one connection; nil once the socket was shut down.
    static func accept(_ fd: CInt) -> CInt? {
        while true {
            let client = Glibc.accept(fd, nil, nil)
            if client >= 0 {
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                return client
            }
            if errno == EINTR || errno == ECONNABORTED { continue }
            return nil
        }
    }
}
