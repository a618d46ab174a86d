#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Talks to systemd's service manager through `$NOTIFY_SOCKET` (sd_notify(3)), without libsystemd.
///
/// The protocol is one datagram per message on a Unix socket, `KEY=VALUE` lines: `READY=1`
/// (after the config is loaded and connecting has started), `STATUS=…` (shown by
/// `systemctl status`), `WATCHDOG=1` (liveness, at least every `WatchdogSec/2`), `RELOADING=1`
/// with `MONOTONIC_USEC=…` around a reload, `STOPPING=1`. A path starting with `@` names a socket
/// in the abstract namespace. Without `NOTIFY_SOCKET` (not run by systemd) every call does nothing.
public struct SystemdNotifier: Sendable {
    /// The socket path from `NOTIFY_SOCKET`, or `nil` when not run under `Type=notify`.
    public let socketPath: String?
    /// How often systemd wants `WATCHDOG=1`: half of `WATCHDOG_USEC`, when it is meant for us.
    public let watchdogInterval: Duration?

    public init(environment: [String: String]) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        // WATCHDOG_PID, when set, names the process the watchdog is meant for (sd_watchdog_enabled(3)).
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let usec = environment["WATCHDOG_USEC"].flatMap(Int64.init), usec > 0 {
            watchdogInterval = .microseconds(usec / 2)
        } else {
            watchdogInterval = nil
        }
    }

    /// Whether messages go anywhere.
    public var isEnabled: Bool { socketPath != nil }

    /// `READY=1` and a status line.
    @discardableResult
    public func ready(status: String) -> Bool { send("READY=1\nSTATUS=\(Self.oneLine(status))") }

    /// `STATUS=…`.
    @discardableResult
    public func status(_ status: String) -> Bool { send("STATUS=\(Self.oneLine(status))") }

    /// `WATCHDOG=1`: the liveness check passed.
    @discardableResult
    public func watchdog() -> Bool { send("WATCHDOG=1") }

    /// `RELOADING=1` with the monotonic timestamp systemd asks for.
    @discardableResult
    public func reloading() -> Bool {
        send("RELOADING=1\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())\nSTATUS=Reloading configuration")
    }

    /// `STOPPING=1`.
    @discardableResult
    public func stopping() -> Bool { send("STOPPING=1\nSTATUS=Stopping") }

    /// Sends one raw message; returns whether it was delivered (false when not under systemd).
    @discardableResult
    public func send(_ message: String) -> Bool {
        guard let socketPath else { return false }
        #if canImport(Glibc)
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let fd = socket(AF_UNIX, SOCK_DGRAM, 0)
        #endif
        guard fd >= 0 else { return false }
        defer { close(fd) }

        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sockaddrPointer, length) }
            }
        }
        return sent == bytes.count
    }

    /// systemd's STATUS is one line.
    static func oneLine(_ text: String) -> String {
        String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }

    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }
}
