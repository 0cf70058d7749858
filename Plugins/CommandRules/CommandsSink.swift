import GatewayCore

/// One rule of the `commands` sink: an event of a device (optionally at one fence) makes a command.
public struct CommandRule: Sendable, Hashable {
    /// The event kind it answers (`enter`, `exit`, `dwell`, `fix_lost`, …).
    public var on: PositionEvent.Kind
    /// The fence (id or name) the event must be about; nil: any.
    public var fence: String?
    /// The command, without its device (the event's).
    public var command: CommandRequest

    /// Whether `event` is this rule's.
    func matches(_ event: PositionEvent) -> Bool {
        event.kind == on && (fence == nil || event.fenceId == fence || event.fenceName == fence)
    }
}

/// Configuration of the `commands` sink.
public struct CommandsSinkConfiguration: Sendable, Hashable {
    public var rules: [CommandRule] = []
}

/// Turns events into commands to devices, by rules: on a geofence `enter` of fence `park`, tell the
/// tracker to report every 20 s; on `exit`, every 2 minutes.
///
/// A rule does not send what the device already has: when the device confirmed the same setting
/// last (its "shadow": the last `set_interval` it answered), or a command of the same type with
/// the same parameters waits to be sent, nothing is submitted (`commands.skipped_confirmed`,
/// `commands.skipped_pending`). A waiting command of the same type with other parameters is
/// cancelled first (`commands.superseded`): the newest decision wins, the device never gets the
/// stale one. With the geofence's hysteresis, a device on the border does not flap.
///
/// Submitting is durable before the batch is acknowledged, so a replay after a crash meets the
/// pending command and submits nothing twice. A command the gateway cannot take (an unknown
/// device, a type its protocol cannot carry) is counted (`commands.refused`) and logged at most
/// once a minute per device; it never stops the pipeline.
public struct CommandsSink: PositionSink {
    let configuration: CommandsSinkConfiguration
    let context: ComponentContext

    public func run(input: any SinkInput) async throws {
        var refusals = LogRateLimit()
        while let batch = await input.next() {
            for position in batch {
                guard let event = position.event else { continue }
                for rule in configuration.rules where rule.matches(event) {
                    apply(rule, to: position.device ?? position.deviceKey, refusals: &refusals)
                }
            }
            input.acknowledge()
            context.stats.addEmitted(batch.count)
        }
    }

    private func apply(_ rule: CommandRule, to device: String, refusals: inout LogRateLimit) {
        guard let commands = context.commands else { return }
        var request = rule.command
        request.device = device
        let stats = context.stats
        if request.type == .setInterval, let seconds = CommandRequest.intervalSeconds(request.parameters),
           commands.shadow(device: device)[.setInterval] == String(seconds),
           !commands.commands(device: device).contains(where: { $0.type == .setInterval && !$0.status.isFinal && $0.status != .delivered }) {
            return stats.count("commands.skipped_confirmed")
        }
        for waiting in commands.commands(device: device) where waiting.type == request.type && (waiting.status == .queued || waiting.status == .sent) {
            if waiting.parameters == request.parameters { return stats.count("commands.skipped_pending") }
            if (try? commands.cancel(waiting.id, by: context.id)) != nil { stats.count("commands.superseded") }
        }
        do {
            _ = try commands.submit(request)
            stats.count("commands.submitted")
        } catch {
            stats.count("commands.refused")
            if let suppressed = refusals.allow(device, now: context.clock.now().milliseconds) {
                context.logger.warning("\(request.type.rawValue) for \(device) not taken: \(error)\(LogRateLimit.suffix(suppressed))")
            }
        }
    }
}

/// The `commands` sink.
public enum CommandsSinkPlugin: SinkPlugin {
    public static let info = PluginInfo(
        type: "commands", kind: .sink,
        summary: "Turns events into commands to devices by rules (a geofence enter sets the reporting interval to 20 s, an exit to 2 min); never resends what the device confirmed or what waits to be sent.",
        folder: "CommandRules",
        options: [
            OptionSpec("rules", "array", required: true, "Rules: {\"on\": an event kind (enter, exit, dwell, fix_lost, fix_regained, no_data, data_resumed, antenna), \"fence\": a fence id or name (optional), \"command\": {\"type\": …, its parameters, \"ttl\", \"attempts\"}}."),
        ],
        sample: #"{ "type": "commands", "inputs": ["fence"], "rules": [ { "on": "enter", "fence": "park", "command": { "type": "set_interval", "interval": "20s" } }, { "on": "exit", "fence": "park", "command": { "type": "set_interval", "interval": "120s" } } ] }"#
    )

    public static func configure(_ options: inout OptionReader) -> CommandsSinkConfiguration {
        var c = CommandsSinkConfiguration()
        guard let value = options.value("rules") else {
            options.report("rules", "required: a list of rules")
            return c
        }
        guard case .array(let list) = value, !list.isEmpty else {
            options.report("rules", "expected a non-empty list of rules, got \(value.kindName)")
            return c
        }
        for (i, item) in list.enumerated() {
            let path = "rules[\(i)]"
            guard case .object(let o) = item else {
                options.report(path, "expected an object with on and command")
                continue
            }
            for key in o.keys where !["on", "fence", "command"].contains(key) { options.report("\(path).\(key)", "unknown key; keys: on, fence, command") }
            let kinds = PositionEvent.Kind.allCases.filter { $0 != .command }
            guard let on = o["on"]?.stringValue.flatMap(PositionEvent.Kind.init(rawValue:)), on != .command else {
                options.report("\(path).on", "expected an event kind: \(kinds.map(\.rawValue).joined(separator: ", "))")
                continue
            }
            var fence: String?
            if let f = o["fence"] {
                guard let s = f.stringValue, !s.isEmpty else {
                    options.report("\(path).fence", "expected a fence id or name")
                    continue
                }
                fence = s
            }
            guard let command = o["command"] else {
                options.report("\(path).command", "required: {\"type\": …, its parameters}")
                continue
            }
            if command["id"] != nil {
                // Every firing makes a new command: one id would be taken by the first only.
                options.report("\(path).command.id", "not in a rule: each command the rule makes gets its own id")
                continue
            }
            do {
                let request = try CommandRequest.parse(command, device: "", submittedBy: options.path.split(separator: ".").last.map(String.init) ?? "commands")
                c.rules.append(CommandRule(on: on, fence: fence, command: request))
            } catch {
                for problem in error.problems { options.report("\(path).command", problem) }
            }
        }
        return c
    }

    public static func submitsCommands(_ configuration: CommandsSinkConfiguration) -> Bool { true }

    public static func makeSink(_ configuration: CommandsSinkConfiguration, context: ComponentContext) throws -> any PositionSink {
        guard context.commands != nil else {
            throw CommandsSinkError(description: "this gateway keeps no commands (settings.commands is null): the commands sink has nothing to submit to")
        }
        return CommandsSink(configuration: configuration, context: context)
    }
}

/// The `commands` sink cannot start.
struct CommandsSinkError: Error, CustomStringConvertible {
    var description: String
}
