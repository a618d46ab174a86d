import MQTTVocabulary

/// What the two clients refuse when a bridge starts, checked at load time so that `check` and
/// `run` agree (docs/contract.md §3: an invalid config is exit 78 for both). The limits themselves
/// are stated once, in `MQTTClientLimits` (MQTTVocabulary) and `PusherClientLimits`
/// (PusherProtocol); the clients check the same functions when they are made
/// (`MQTTConfiguration.problems`, `PusherClientOptions.problems`), and
/// Tests/BridgeDaemonTests/StartValidationTests.swift feeds every such key's boundary values to
/// both and compares.
extension LoadContext {
    /// A configured topic to publish to: MQTT's rules (`TopicName`), then what the MQTT client
    /// refuses in any string (control characters, noncharacters).
    static func mqttTopicProblem(_ topic: String) -> String? {
        TopicName.problem(with: topic) ?? MQTTClientLimits.stringProblem(topic).map { "topic \($0)" }
    }

    /// In a cluster the MQTT identity is derived (docs/contract.md §7.4): the client id
    /// `client_id-<instance>`, the status on `<status_topic>/<instance>`, and the member record
    /// (the Last Will), heartbeats, held reports, snapshot requests and discovered lists below
    /// `<membership_topic>` (`clusterTopics`). Each must still be something the client accepts (the
    /// start checks `fixedMQTTTopics` again).
    func checkDerivedMQTTIdentity(_ bridge: BridgeSettings, path: ConfigKeyPath) {
        guard bridge.cluster != nil else { return }
        let mqttPath = path.key("mqtt")
        if let problem = MQTTClientLimits.clientIDProblem(bridge.effectiveMQTTClientID) {
            report(mqttPath.key("client_id"), "with [bridge.cluster] the client id is client_id-<instance>, which \(problem)")
        }
        if let problem = MQTTClientLimits.topicNameProblem(bridge.effectiveStatusTopic) {
            report(mqttPath.key("status_topic"), "with [bridge.cluster] the status goes to <status_topic>/<instance>, which \(problem)")
        }
        for (level, topic) in bridge.clusterTopics {
            guard let problem = MQTTClientLimits.topicNameProblem(topic) else { continue }
            report(path.key("cluster").key("membership_topic"), "the cluster publishes to <membership_topic>/\(level), which \(problem)")
            break
        }
    }
}
