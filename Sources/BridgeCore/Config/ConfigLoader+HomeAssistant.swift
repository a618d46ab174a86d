/// `[daemon] homeassistant` and `homeassistant_prefix` (docs/contract.md §8.3).
extension LoadContext {
    func readHomeAssistant(_ reader: TableReader, into daemon: inout DaemonSettings) {
        if let enabled = reader.bool("homeassistant") { daemon.homeAssistant.enabled = enabled }
        guard let prefix = reader.string("homeassistant_prefix") else { return }
        if let problem = Self.homeAssistantPrefixProblem(prefix) {
            report(reader.path.key("homeassistant_prefix"), problem)
        } else {
            daemon.homeAssistant.prefix = prefix
        }
    }

    /// Why `prefix` cannot be a discovery prefix: it is the first levels of every config topic
    /// (`<prefix>/<component>/<node_id>/<object_id>/config`) and of the filter `<prefix>/status`,
    /// so it must be a topic the client accepts, without wildcards or empty levels.
    static func homeAssistantPrefixProblem(_ prefix: String) -> String? {
        if prefix.isEmpty { return "is empty; Home Assistant's default is \"\(HomeAssistantSettings.defaultPrefix)\"" }
        if let problem = mqttTopicProblem(prefix) { return problem }
        if prefix.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            return "has an empty topic level (a leading, trailing or doubled '/'): \"\(prefix)\""
        }
        return nil
    }

    /// With discovery on, every topic a bridge's device uses must be one the client accepts: its
    /// config topics (below the prefix, reported there) and its state topic (below the status topic).
    func checkHomeAssistantTopics(_ bridge: BridgeSettings, daemon: DaemonSettings, path: ConfigKeyPath) {
        guard daemon.homeAssistant.enabled, Self.homeAssistantPrefixProblem(daemon.homeAssistant.prefix) == nil else { return }
        let device = HomeAssistantDevice(bridge: bridge, prefix: daemon.homeAssistant.prefix)
        if let problem = device.configs.lazy.compactMap({ Self.mqttTopicProblem($0.topic) }).first {
            report(
                ConfigKeyPath.root.key("daemon").key("homeassistant_prefix"),
                "the Home Assistant config topics of bridge \(bridge.name) (<prefix>/<component>/\(device.nodeID)/<entity>/config): \(problem)"
            )
        }
        if let problem = Self.mqttTopicProblem(device.stateTopic) {
            report(path.key("mqtt").key("status_topic"), "the Home Assistant state goes to <status topic>/state, which: \(problem)")
        }
    }
}
