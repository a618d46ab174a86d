/// BridgeCore's users see the bridge vocabulary (buffer limits and overflow policy, timestamps,
/// directions, the messages a rule produces) through it: the types moved to the leaf module
/// BridgeVocabulary so that Durability needs them without BridgeCore (docs/architecture.md, "Modules").
@_exported import BridgeVocabulary
