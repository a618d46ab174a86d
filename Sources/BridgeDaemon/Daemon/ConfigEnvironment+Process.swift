import BridgeCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension ConfigEnvironment {
    /// The real process environment and file system (BridgeCore itself reads no file).
    public static var process: ConfigEnvironment {
        ConfigEnvironment(
            variables: ProcessInfo.processInfo.environment,
            readFile: { path in FileManager.default.contents(atPath: path).map { [UInt8]($0) } },
            fileExists: { path in FileManager.default.fileExists(atPath: path) })
    }
}
