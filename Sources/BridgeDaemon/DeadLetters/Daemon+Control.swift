import BridgeCore

extension Daemon {
    /// Carries out one control-socket request (docs/contract.md §8.3) and returns its reply line.
    /// Letters of a bridge that is not running now are reported missing; nothing else changes.
    func controlRequest(_ request: ControlRequest) async -> String {
        switch request {
        case .ping:
            return "{\"ok\":true}\n"
        case .redrive(let selection):
            guard let runtimes = runtimes(for: selection) else { return ControlReply.error(unknownBridge(selection)) }
            let reports = await withTaskGroup(of: RedriveReport.self) { group in
                for runtime in runtimes { group.addTask { await runtime.redrive(selection) } }
                var total = RedriveReport()
                for await report in group { total.add(report) }
                return total
            }
            var report = reports
            report.missing += missingBridges(selection).sorted()
            return ControlReply.redrive(report)
        case .purge(let selection):
            guard let runtimes = runtimes(for: selection) else { return ControlReply.error(unknownBridge(selection)) }
            var removed = 0
            var missing: [String] = []
            var busy = 0
            for runtime in runtimes {
                let result = await runtime.deadLetters.purge(selection)
                removed += result.letters.count
                busy += result.busy
                missing += result.missing.map { "\(runtime.name):\($0)" }
            }
            return ControlReply.purge(removed: removed, missing: missing + missingBridges(selection).sorted(), busy: busy)
        }
    }

    /// The running bridges a selection reaches; nil when it names a bridge that is not running.
    private func runtimes(for selection: DeadLetterSelection) -> [BridgeRuntime]? {
        let bridges = state.withLock { $0.bridges }
        switch selection {
        case .ids(let ids):
            return Set(ids.map(\.bridge)).compactMap { bridges[$0] }.sorted { $0.name < $1.name }
        case .all(let bridge), .code(_, let bridge):
            guard let bridge else { return bridges.values.sorted { $0.name < $1.name } }
            return bridges[bridge].map { [$0] }
        }
    }

    /// Ids of a selection whose bridge is not running here.
    private func missingBridges(_ selection: DeadLetterSelection) -> [String] {
        guard case .ids(let ids) = selection else { return [] }
        let bridges = state.withLock { $0.bridges }
        return ids.filter { bridges[$0.bridge] == nil }.map(\.description)
    }

    private func unknownBridge(_ selection: DeadLetterSelection) -> String {
        switch selection {
        case .all(let bridge), .code(_, let bridge): "no bridge named \"\(bridge ?? "")\" runs in this daemon"
        case .ids: "no such bridge"
        }
    }
}
