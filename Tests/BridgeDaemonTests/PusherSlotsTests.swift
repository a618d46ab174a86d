import BridgeCore
import Locking
import Logging
import PusherChannels
import Testing

@testable import BridgeDaemon

/// The Pusher clients by connection, replaced by a reload (Runtime/PusherSlots.swift): a replacement
/// gets the old client's channels and reaches the connection's runner; subscribing or leaving on
/// every client goes over the list again when a replacement happened meanwhile. Clients that are
/// never connected: only their channel lists are looked at.
@Suite struct PusherSlotsTests {
    static func client() -> PusherClient {
        let options = PusherClientOptions(key: "k", host: .host("127.0.0.1", port: 1), encrypted: false)
        return PusherClient(options: options, logger: Logger(label: "t"))
    }

    static func slots(_ clients: [PusherClient]) throws -> PusherSlots {
        let settings = try #require(
            ConfigLoader.parse(
                DiscoveryRuntimeTests.config, file: "b.conf",
                environment: .init(variables: [:], readFile: { _ in nil }, fileExists: { _ in false })
            ).bridges.first)
        var decisions = RuntimeDecisions(supervisor: BridgeSupervisor(settings: settings, incarnation: "0", startedAt: 0))
        decisions.pusherSlots = PusherSlotsState(clients: clients, rest: nil)
        return PusherSlots(decisions: Locked(decisions), count: clients.count)
    }

    @Test func aReplacementGetsTheOldClientsChannelsAndReachesTheRunner() async throws {
        // Expected: the new client of connection 1 asks for the two channels connection 1 had; the
        // list now names it; the runner of connection 1, looking after the replacement, gets it at
        // once (queued), and one looking before it is woken with it.
        let old = [Self.client(), Self.client()]
        let slots = try Self.slots(old)
        slots.forEachClient { _ = $0.subscribe("a") }
        slots.forEachClient { _ = $0.subscribe("b") }
        let new = Self.client()
        #expect(slots.replace(1, with: new).sorted() == ["a", "b"])
        #expect(new.channelNames.sorted() == ["a", "b"])
        #expect(slots.clients[1] === new && slots.clients[0] === old[0])
        let queued = await slots.nextReplacement(1)
        #expect(queued === new)

        let newer = Self.client()
        async let woken = slots.nextReplacement(0)  // parked first or finds it queued: either way it gets it
        _ = slots.replace(0, with: newer)
        #expect(await woken === newer)
    }

    @Test func leavingOnEveryClientGoesOverTheListAgainAfterAReplacement() throws {
        // Expected: a leave that read the list before a replacement (the replacement happens during
        // its pass, here from inside it) reaches the new client too: "a" is left everywhere.
        let slots = try Self.slots([Self.client(), Self.client()])
        slots.forEachClient { _ = $0.subscribe("a") }
        let new = Self.client()
        var passes = 0
        slots.forEachClient { client in
            if passes == 0, client === slots.clients[0] { _ = slots.replace(1, with: new) }
            passes += 1
            client.unsubscribe("a")
        }
        #expect(passes > 2, "a second pass over the new list")
        #expect(new.channelNames.isEmpty)
        #expect(slots.clients.allSatisfy { $0.channelNames.isEmpty })
    }

    @Test func aCancelledRunnerGetsNothing() async throws {
        let slots = try Self.slots([Self.client()])
        let runner = Task { await slots.nextReplacement(0) }
        runner.cancel()
        #expect(await runner.value == nil)
    }
}
