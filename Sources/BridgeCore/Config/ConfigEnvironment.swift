import Backoff
import PusherProtocol
import TOMLKit

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where the loader gets what lies outside the file: environment variables (for `${VAR}` and
/// `$CREDENTIALS_DIRECTORY`) and the file system (for `*_file` secrets and files that must exist).
/// BridgeCore touches no file itself: the daemon passes the real ones (`ConfigEnvironment.process`,
/// in BridgeDaemon), tests an in-memory map.
public struct ConfigEnvironment: Sendable {
    /// Variables `${NAME}` may refer to.
    public var variables: [String: String]
    /// Reads a whole file; `nil` when it cannot be read.
    public var readFile: @Sendable (String) -> [UInt8]?
    /// Whether a regular file or directory exists at the path.
    public var fileExists: @Sendable (String) -> Bool

    public init(
        variables: [String: String], readFile: @escaping @Sendable (String) -> [UInt8]?, fileExists: @escaping @Sendable (String) -> Bool
    ) {
        self.variables = variables
        self.readFile = readFile
        self.fileExists = fileExists
    }

    /// The same file system with other variables.
    public func with(variables: [String: String]) -> ConfigEnvironment {
        var copy = self
        copy.variables = variables
        return copy
    }
}
