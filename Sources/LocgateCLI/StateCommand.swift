import Foundation
import GatewayCore
import SQLiteState

/// `locgate state list|show|forget`: the per-device state a pipeline keeps (`settings.state`).
/// Reading works while the pipeline runs (the store is SQLite in WAL mode); `forget` needs it
/// stopped, since the running pipeline would write the device's state back.
enum StateCommand {
    static let usage = """
    usage: locgate state list CONFIG
           locgate state show CONFIG DEVICE
           locgate state forget CONFIG DEVICE
    """

    static func run(_ args: [String], registry: PluginRegistry) {
        guard let action = args.first, args.count >= 2 else { LocgateCommand.fail(usage, code: 2) }
        let config = LocgateCommand.load(args[1], registry: registry)
        if let backend = config.settings.state.backend {
            LocgateCommand.fail("\(args[1]): keeps per-device state in \(backend.location) (settings.state.\(backend.key)), which this command does not read; with the nats CLI: nats kv ls|get|del <bucket> (keys <transform>.<device>)", code: 1)
        }
        guard let path = config.stateStorePath else {
            LocgateCommand.fail("\(args[1]): keeps per-device state in memory only (no settings.state.path and no durable queue)", code: 1)
        }
        switch (action, args.count) {
        case ("list", 2):
            let records = read(path)
            print(list(records), terminator: "")
        case ("show", 3):
            let records = read(path).filter { $0.device == args[2] }
            guard !records.isEmpty else { LocgateCommand.fail("no state kept for device \"\(args[2])\" in \(path)", code: 1) }
            print(show(records), terminator: "")
        case ("forget", 3):
            do {
                let n = try SQLiteStateStore.forget(device: args[2], path: path)
                print(n == 0 ? "no state kept for device \"\(args[2])\"" : "forgot device \"\(args[2])\": the state of \(n) transform(s)")
            } catch {
                LocgateCommand.fail("\(error.path): \(error.message)\(error.message.contains("in use") ? "; stop the pipeline first" : "")", code: 1)
            }
        default:
            LocgateCommand.fail(usage, code: 2)
        }
    }

    static func read(_ path: String) -> [DeviceStateRecord] {
        do { return try SQLiteStateStore.read(path: path) } catch {
            LocgateCommand.fail("\(error.path): \(error.message)", code: 1)
        }
    }

    /// One line per device: the transforms keeping its state and the last time it was written.
    static func list(_ records: [DeviceStateRecord]) -> String {
        var byDevice: [String: (transforms: [String], updated: Int64)] = [:]
        for r in records {
            var entry = byDevice[r.device] ?? ([], 0)
            entry.transforms.append(r.transform)
            entry.updated = max(entry.updated, r.updatedMilliseconds)
            byDevice[r.device] = entry
        }
        let rows = byDevice.keys.sorted().map { d in
            [d, byDevice[d]!.transforms.sorted().joined(separator: ","), Timestamp(milliseconds: byDevice[d]!.updated).iso8601]
        }
        return table(["DEVICE", "TRANSFORMS", "UPDATED"], rows) + "\(rows.count) device(s)\n"
    }

    /// Each transform's state of one device, as the transform saved it.
    static func show(_ records: [DeviceStateRecord]) -> String {
        records.map { r in
            "\(r.transform) (\(r.format), updated \(Timestamp(milliseconds: r.updatedMilliseconds).iso8601)): \(r.state?.jsonText ?? "null")\n"
        }.joined()
    }

    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let widths = header.indices.map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
        return ([header] + rows).map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ") + "\n"
        }.joined()
    }
}
