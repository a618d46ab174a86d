import BridgeDaemon
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix datagram socket standing in for systemd's notify socket.
final class NotifyListener {
    let path: String
    let fd: Int32

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8)).sock").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(result == 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The next datagram, or nil after 5 s.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }

    deinit {
        close(fd)
        unlink(path)
    }
}

@Suite struct SystemdNotifierTests {
    @Test func sendsEachMessageAsOneDatagram() throws {
        let listener = try NotifyListener()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": listener.path])
        #expect(notifier.isEnabled)
        #expect(notifier.ready(status: "factory: pusher connected,\nmqtt connected"))
        #expect(listener.receive() == "READY=1\nSTATUS=factory: pusher connected, mqtt connected")
        #expect(notifier.watchdog())
        #expect(listener.receive() == "WATCHDOG=1")
        #expect(notifier.reloading())
        let reloading = try #require(listener.receive())
        #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        #expect(notifier.stopping())
        #expect(listener.receive() == "STOPPING=1\nSTATUS=Stopping")
    }

    @Test func disabledWithoutNotifySocket() {
        let notifier = SystemdNotifier(environment: [:])
        #expect(!notifier.isEnabled)
        #expect(!notifier.ready(status: "x"))
        #expect(notifier.watchdogInterval == nil)
    }

    @Test func watchdogIntervalIsHalfOfWatchdogUsec() {
        #expect(SystemdNotifier(environment: ["WATCHDOG_USEC": "20000000"]).watchdogInterval == .seconds(10))
        #expect(SystemdNotifier(environment: ["WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "1"]).watchdogInterval == nil)
        #expect(
            SystemdNotifier(environment: ["WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "\(getpid())"]).watchdogInterval == .seconds(10))
        #expect(SystemdNotifier(environment: ["WATCHDOG_USEC": "zero"]).watchdogInterval == nil)
    }

    @Test func missingSocketFailsQuietly() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/notify.sock"])
        #expect(!notifier.status("x"))
    }
}
