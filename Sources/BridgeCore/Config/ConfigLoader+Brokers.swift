import MQTTVocabulary

/// `[bridge.mqtt] hosts`: the nodes of a broker cluster, tried in turn (docs/contract.md §8.4).
extension LoadContext {
    /// Reads `hosts` into `settings` (`host`/`port` from its first entry, `failover` from the rest);
    /// refuses it beside `host` or `port`. `defaultPort` applies to an entry without a port.
    func readBrokerHosts(_ reader: TableReader, defaultPort: Int, into settings: inout MQTTSettings) {
        guard reader.has("hosts") else { return }
        for key in ["host", "port"] where reader.has(key) {
            report(reader.path.key(key), "set either hosts (a broker cluster's nodes) or host and port, not both")
        }
        guard let entries = reader.stringArray("hosts") else { return }
        guard !entries.isEmpty else {
            report(reader.path.key("hosts"), "hosts needs at least one \"host:port\"")
            return
        }
        var nodes: [MQTTBrokerAddress] = []
        for entry in entries {
            guard let node = Self.brokerNode(entry, defaultPort: defaultPort) else {
                report(
                    reader.path.key("hosts"),
                    "\"\(entry)\" is not \"host\", \"host:port\" or \"[IPv6]:port\" with a port 1…65535")
                return
            }
            if nodes.contains(node) {
                report(reader.path.key("hosts"), "\(node) is listed twice")
                return
            }
            nodes.append(node)
        }
        settings.host = nodes[0].host
        settings.port = nodes[0].port
        settings.failover = Array(nodes.dropFirst())
    }

    /// `host`, `host:port`, `[IPv6]` or `[IPv6]:port` (a bare IPv6 address takes `defaultPort`).
    static func brokerNode(_ text: String, defaultPort: Int) -> MQTTBrokerAddress? {
        HostPort.parse(text, defaultPort: defaultPort).map { MQTTBrokerAddress(host: $0.host, port: $0.port) }
    }
}
