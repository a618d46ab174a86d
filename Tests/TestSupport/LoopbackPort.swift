#if canImport(Glibc)
    import Glibc
#endif

/// Ports on 127.0.0.1 for the servers a test starts (mosquitto, pusher-local).
public enum LoopbackPort {
    /// A free 127.0.0.1 port **below the kernel's ephemeral range**. A port from that range
    /// could be picked as the local port of a client's outgoing connection while the server is
    /// stopped (and even self-connect), and then the restarted server cannot bind it.
    public static func free() throws -> Int {
        let range =
            (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) } ?? []
        let ephemeralLow = range.first ?? 32768
        let candidates = ephemeralLow > 12000 ? 10000..<ephemeralLow : 49152..<65536
        for _ in 0..<200 {
            let port = Int.random(in: candidates)
            if canBind(port) { return port }
        }
        throw TestFailure("no free port found in \(candidates)")
    }

    /// Whether 127.0.0.1:`port` can be bound right now.
    public static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return bound == 0
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return rc == 0
    }

    private static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
