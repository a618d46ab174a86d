/// The members of presence channels as a bridge's N Pusher connections list them, consolidated
/// into one list per channel for the presence mirrors (docs/pusher-merge.md, "Presence"), as a
/// pure state machine.
///
/// A member is present while any connection that holds the channel lists them. So a member added
/// is reported once, by the first connection to list them; a member removed is reported when the
/// last connection listing them lets go — by its own `pusher:member_removed`, or because it lost
/// the channel while another connection still holds it (that one does not list the member). A
/// connection's drop reports no removals for members the others list. When the last connection
/// loses a channel the channel is forgotten here and the mirror keeps what it showed; the next
/// connection to hold it reports its full list (``Change/subscribed(_:members:)``), which the
/// mirror compares with what it shows, as it does after a reconnect with one connection.
///
/// With one connection every change passes through as it came.
public struct PresenceConsolidation: Sendable {
    /// A change of a channel's consolidated list, for the bridge machine's presence mirrors.
    public enum Change: Sendable, Equatable {
        /// The channel's full list (the first connection holding it succeeded).
        case subscribed(String, members: [PresenceMember])
        case added(String, PresenceMember)
        case removed(String, userID: String)
    }

    /// How many connections the bridge has (1 to 3).
    public let connections: Int
    /// Per channel, per member: the connections listing them (bit `c` for connection `c`), and
    /// their `user_info`.
    private var channels: [String: [String: Listing]] = [:]

    private struct Listing: Sendable {
        var listedBy: UInt8
        var member: PresenceMember
    }

    public init(connections: Int) {
        self.connections = min(max(connections, 1), 3)
    }

    /// Connection `connection`'s subscription to presence channel `channel` succeeded with `members`.
    public mutating func subscribed(_ channel: String, connection: Int, members: [PresenceMember]) -> [Change] {
        guard connections > 1 else { return [.subscribed(channel, members: members)] }
        let bit = Self.bit(connection)
        guard var listings = channels.removeValue(forKey: channel), listings.values.contains(where: { $0.listedBy != 0 })
        else {
            var listings: [String: Listing] = [:]
            for member in members { listings[member.userID] = Listing(listedBy: bit, member: member) }
            channels[channel] = listings
            return [.subscribed(channel, members: members)]
        }
        defer { channels[channel] = listings }
        // This connection's earlier list (a resubscription) is replaced by the new one.
        let listed = Set(members.map(\.userID))
        var changes = Self.unlist(bit, in: channel, &listings) { !listed.contains($0) }
        for member in members {
            if var listing = listings[member.userID] {
                listing.listedBy |= bit
                listings[member.userID] = listing
            } else {
                listings[member.userID] = Listing(listedBy: bit, member: member)
                changes.append(.added(channel, member))
            }
        }
        return changes
    }

    /// Connection `connection` reported `member` added to `channel`.
    public mutating func added(_ channel: String, connection: Int, member: PresenceMember) -> [Change] {
        guard connections > 1 else { return [.added(channel, member)] }
        let bit = Self.bit(connection)
        var listings = channels[channel] ?? [:]
        defer { channels[channel] = listings }
        if var listing = listings[member.userID] {
            listing.listedBy |= bit
            listings[member.userID] = listing
            return []
        }
        listings[member.userID] = Listing(listedBy: bit, member: member)
        return [.added(channel, member)]
    }

    /// Connection `connection` reported `userID` removed from `channel`.
    public mutating func removed(_ channel: String, connection: Int, userID: String) -> [Change] {
        guard connections > 1 else { return [.removed(channel, userID: userID)] }
        guard var listings = channels[channel], var listing = listings[userID] else { return [] }
        defer { channels[channel] = listings }
        listing.listedBy &= ~Self.bit(connection)
        guard listing.listedBy == 0 else {
            listings[userID] = listing
            return []
        }
        listings[userID] = nil
        return [.removed(channel, userID: userID)]
    }

    /// Connection `connection` no longer holds `channel`; `stillHeld` tells whether another
    /// connection does. Returns the members only it listed, removed — none when no connection
    /// holds the channel any more (it is forgotten, the mirror keeps what it shows).
    public mutating func connectionLost(_ connection: Int, channel: String, stillHeld: Bool) -> [Change] {
        guard connections > 1, var listings = channels.removeValue(forKey: channel) else { return [] }
        guard stillHeld else { return [] }
        let changes = Self.unlist(Self.bit(connection), in: channel, &listings) { _ in true }
        channels[channel] = listings
        return changes
    }

    /// Takes connection `bit` off the listings of the members `which` selects, in `user_id` order;
    /// returns the removals of those no connection lists any more.
    private static func unlist(
        _ bit: UInt8, in channel: String, _ listings: inout [String: Listing], which: (String) -> Bool
    ) -> [Change] {
        var changes: [Change] = []
        for userID in listings.keys.sorted() where which(userID) {
            guard var listing = listings[userID], listing.listedBy & bit != 0 else { continue }
            listing.listedBy &= ~bit
            if listing.listedBy == 0 {
                listings[userID] = nil
                changes.append(.removed(channel, userID: userID))
            } else {
                listings[userID] = listing
            }
        }
        return changes
    }

    /// The bridge left `channel` on purpose: forgotten.
    public mutating func channelLeft(_ channel: String) {
        channels[channel] = nil
    }

    /// The members of `channel` as consolidated now, in `user_id` order (none with one connection:
    /// nothing is kept then).
    public func members(of channel: String) -> [PresenceMember] {
        (channels[channel] ?? [:]).values.map(\.member).sorted { $0.userID < $1.userID }
    }

    private static func bit(_ connection: Int) -> UInt8 { UInt8(1) << UInt8(min(max(connection, 0), 7)) }
}
