import BridgeCore
import Logging
import PusherChannels

/// One `GET /apps/ID/channels` to make (channel discovery, docs/contract.md §7.1).
struct DiscoveryPoll: Sendable {
    var rule: String
    var prefix: String
    var info: String
}

/// Channel discovery at work: the polls, and what Pusher and webhooks report, fed to the
/// supervisor (BridgeCore's ``BridgeSupervisor``, which holds the ``ChannelDiscovery``); its timer
/// is the supervisor's (BridgeRuntime+Supervisor.swift).
extension BridgeRuntime {
    /// `{"subscription_count":N}` → N.
    static let countPointer = try? JSONPointer.parse("/subscription_count").get()

    /// Runs the polls the supervisor asks for until the bridge stops.
    func runDiscovery() async {
        await withDiscardingTaskGroup { group in
            for await poll in discoveryPolls.stream {
                group.addTask { await self.discoveryPoll(poll) }
            }
        }
    }

    /// `GET /apps/ID/channels?filter_by_prefix=P&info=…`, its answer or failure to the supervisor.
    private func discoveryPoll(_ poll: DiscoveryPoll) async {
        let now = Self.supervisorNow
        // In a cluster another member may poll this rule; its list arrives through the broker.
        guard decisions.withLock({ $0.supervisor.pollStarting(rule: poll.rule, now) }) else { return }
        guard let rest else {
            // `check` refuses channel_prefix without app_id and secret; never here in practice.
            perform { $0.pollImpossible(rule: poll.rule, $1) }
            return
        }
        do {
            let reply = try await rest.channels(prefix: poll.prefix, info: poll.info.isEmpty ? [] : [poll.info])
            let occupied = reply.map { name, info in
                OccupiedChannel(
                    name, count: poll.info == "user_count" ? info.userCount : poll.info.isEmpty ? nil : info.subscriptionCount)
            }
            perform { $0.pollSucceeded(rule: poll.rule, prefix: poll.prefix, channels: occupied, $1) }
        } catch {
            let unitRandom = Double.random(in: 0...1)
            perform {
                $0.pollFailed(
                    rule: poll.rule, prefix: poll.prefix, error: "\(error)", retryable: error.isRetryable, unitRandom: unitRandom, $1)
            }
        }
    }

    /// N of `{"subscription_count":N}`.
    static func subscriptionCount(_ data: String?) -> Int? {
        guard let data, let pointer = countPointer else { return nil }
        var document = PayloadDocument(Array(data.utf8))
        return document.value(at: pointer)?.templateText.flatMap { Int($0) }
    }
}
