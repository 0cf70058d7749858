import Foundation
import GatewayCore
import Locking
import SystemIO
import EnvironmentChecks

/// One device a listening source knows: the name its positions carry and static attributes.
public struct DeviceEntry: Sendable, Hashable {
    /// The positions' `device`.
    public var name: String
    /// Added to each of its positions (the frame's own attributes win on a clash).
    public var attributes: [String: String]

    public init(name: String, attributes: [String: String] = [:]) {
        self.name = name
        self.attributes = attributes
    }
}

/// Who may send: the `devices` and `unknown_devices` options of every listening source.
///
/// `devices` is an object (identifier → name, or → `{"name": …, "attributes": {…}}`) or the
/// path of a JSON file holding one. Identifiers are what the device sends: a tracker's IMEI,
/// an app's user/device, a `tcp` hello line.
public struct DeviceDirectoryConfiguration: Sendable, Hashable {
    public var entries: [String: DeviceEntry] = [:]
    /// The file the entries come from, re-read when it changes.
    public var file: String?
    /// `unknown_devices: "accept"`: an unlisted device is taken under its own identifier.
    public var acceptUnknown = DeviceDirectoryConfiguration.unknownDevicesOption().defaultValue

    public init(entries: [String: DeviceEntry] = [:], file: String? = nil,
                acceptUnknown: Bool = DeviceDirectoryConfiguration.unknownDevicesOption().defaultValue) {
        self.entries = entries
        self.file = file
        self.acceptUnknown = acceptUnknown
    }

    /// `unknown_devices`; its summary names what identifies a device to the plugin.
    public static func unknownDevicesOption(identifier: String = "identifier") -> Option<Bool> {
        Option("unknown_devices", spellings: (no: "reject", yes: "accept"), default: false,
               "A device not in devices: refused (counted, its \(identifier) logged at most once a minute), or accepted under its \(identifier).")
    }

    /// The two options, for a plugin's option list.
    public static func optionSpecs(identifier: String) -> [OptionSpec] {
        [
            OptionSpec("devices", "object or path", "Who may send: \(identifier) → name (or {\"name\", \"attributes\"}), inline or in a JSON file re-read when it changes. Required unless unknown_devices is \"accept\"."),
            unknownDevicesOption(identifier: identifier).spec,
        ]
    }

    /// Reads `devices` and `unknown_devices`. With `required`, a configuration that would
    /// refuse every device is an error.
    public static func read(_ options: inout OptionReader, required: Bool = true) -> DeviceDirectoryConfiguration {
        var c = DeviceDirectoryConfiguration()
        c.acceptUnknown = options.read(unknownDevicesOption())
        if options.has("devices") {
            switch options.value("devices") {
            case .string?:
                c.file = options.filePath("devices")
            case .object(let object)?:
                c.entries = DeviceDirectoryConfiguration.entries(object, report: { key, message in
                    options.report(key.isEmpty ? "devices" : "devices.\(key)", message)
                })
            case let other?:
                options.report("devices", "expected an object (identifier to name) or the path of a JSON file, got \(other.kindName)")
            case nil:
                break
            }
        } else if required && !c.acceptUnknown {
            options.report("devices", "required unless unknown_devices is \"accept\": without it every device is refused")
        }
        return c
    }

    /// Entries from a JSON object; problems go to `report` with the key's path inside it.
    static func entries(_ object: JSONObject, report: (String, String) -> Void) -> [String: DeviceEntry] {
        var entries: [String: DeviceEntry] = [:]
        for (identifier, value) in object {
            if identifier.isEmpty {
                report(identifier, "an identifier must not be empty")
                continue
            }
            switch value {
            case .string(let name) where !name.isEmpty:
                entries[identifier] = DeviceEntry(name: name)
            case .object(let o):
                guard case .string(let name)? = o["name"], !name.isEmpty else {
                    report(identifier, "expected \"name\": a non-empty string")
                    continue
                }
                var attributes: [String: String] = [:]
                if let a = o["attributes"] {
                    guard case .object(let map) = a else {
                        report("\(identifier).attributes", "expected an object of strings")
                        continue
                    }
                    for (k, v) in map {
                        guard let text = v.scalarText else {
                            report("\(identifier).attributes.\(k)", "expected a string, number or boolean")
                            continue
                        }
                        attributes[k] = text
                    }
                }
                for key in o.keys where key != "name" && key != "attributes" {
                    report("\(identifier).\(key)", "unknown key; keys: name, attributes")
                }
                entries[identifier] = DeviceEntry(name: name, attributes: attributes)
            default:
                report(identifier, "expected a device name or {\"name\": …, \"attributes\": {…}}, got \(value.kindName)")
            }
        }
        return entries
    }

    /// Reads a devices file; the error names the file and every problem in it.
    public static func load(file path: String) throws(DeviceDirectoryError) -> [String: DeviceEntry] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DeviceDirectoryError(description: "\(path): \(FileCheck.readProblem(path) ?? "cannot read it")")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse([UInt8](data))
        } catch {
            throw DeviceDirectoryError(description: "\(path): not JSON: \(error)")
        }
        guard case .object(let object) = value else {
            throw DeviceDirectoryError(description: "\(path): expected an object of identifier → device name, got \(value.kindName)")
        }
        var problems: [String] = []
        let entries = DeviceDirectoryConfiguration.entries(object) { key, message in problems.append("\(key): \(message)") }
        guard problems.isEmpty else {
            throw DeviceDirectoryError(description: "\(path): " + problems.joined(separator: "; "))
        }
        return entries
    }

    /// `validate`'s check: the devices file reads and parses.
    public func environmentFindings(context: EnvironmentContext) -> [EnvironmentFinding] {
        guard let file else { return [] }
        do {
            _ = try DeviceDirectoryConfiguration.load(file: file)
            return []
        } catch {
            return [context.error("devices", error.description)]
        }
    }
}

/// A devices file that cannot be used.
public struct DeviceDirectoryError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(description: String) { self.description = description }
}

/// The running directory: looks devices up, re-reading its file when it changed.
///
/// Lookups happen on the I/O loop's thread when a device identifies; a file is stat'ed at most
/// once per ``recheckInterval`` and only when a device is not found, so adding an IMEI to the
/// file lets that device in at its next attempt without a reload.
public final class DeviceDirectory: Sendable {
    /// How often an unknown device may cause the file to be checked for changes.
    public static let recheckIntervalMilliseconds: Int64 = 2_000

    private struct State {
        var entries: [String: DeviceEntry]
        var modified: FileVersion?
        var checkedAt: Int64?
    }

    public let configuration: DeviceDirectoryConfiguration
    private let state: Locked<State>
    private let logger: Logger

    /// Loads the file, if any (a file that fails here fails the source's start).
    public init(_ configuration: DeviceDirectoryConfiguration, logger: Logger) throws(DeviceDirectoryError) {
        self.configuration = configuration
        self.logger = logger
        if let file = configuration.file {
            let modified = DeviceDirectory.version(file)
            state = Locked(State(entries: try DeviceDirectoryConfiguration.load(file: file), modified: modified))
        } else {
            state = Locked(State(entries: configuration.entries, modified: nil))
        }
    }

    /// Devices listed.
    public var count: Int { state.withLock { $0.entries.count } }

    /// The names of the devices listed.
    public var names: [String] { state.withLock { $0.entries.values.map(\.name) } }

    /// The entry for `identifier`: listed, or made from the identifier when unknown devices are
    /// accepted; nil when the device is refused. `now` is any millisecond clock.
    public func lookup(_ identifier: String, now: Int64) -> DeviceEntry? {
        if let entry = state.withLock({ $0.entries[identifier] }) { return entry }
        if reloadIfChanged(now: now), let entry = state.withLock({ $0.entries[identifier] }) { return entry }
        return configuration.acceptUnknown ? DeviceEntry(name: identifier) : nil
    }

    /// Re-reads a changed file; true when new entries were loaded.
    private func reloadIfChanged(now: Int64) -> Bool {
        guard let file = configuration.file else { return false }
        let due = state.withLock { s -> Bool in
            if let last = s.checkedAt, now - last < DeviceDirectory.recheckIntervalMilliseconds { return false }
            s.checkedAt = now
            return true
        }
        guard due else { return false }
        let modified = DeviceDirectory.version(file)
        let previous = state.withLock { $0.modified }
        guard let modified, previous != modified else { return false }
        do {
            let entries = try DeviceDirectoryConfiguration.load(file: file)
            let before = state.withLock { s in
                defer {
                    s.entries = entries
                    s.modified = modified
                }
                return s.entries
            }
            logger.info("devices: re-read \(file): \(entries.count) device(s)")
            logRenames(from: before, to: entries)
            return true
        } catch {
            // Keep the devices already known; say once per change what is wrong.
            state.withLock { $0.modified = modified }
            logger.warning("devices: \(error); keeping the \(count) device(s) read before")
            return false
        }
    }

    /// Per-device state (geofence, filters) is kept by the name positions carry: a renamed device
    /// starts afresh under its new name, which is worth a line.
    private func logRenames(from before: [String: DeviceEntry], to after: [String: DeviceEntry]) {
        let renamed = after.compactMap { id, entry -> String? in
            guard let old = before[id]?.name, old != entry.name else { return nil }
            return "\(id) (\(old) → \(entry.name))"
        }.sorted()
        guard !renamed.isEmpty else { return }
        let shown = renamed.prefix(5).joined(separator: ", ") + (renamed.count > 5 ? " and \(renamed.count - 5) more" : "")
        logger.info("devices: renamed \(shown): stateful transforms start them afresh under the new name")
    }

    /// What tells one version of a file from the next: an editor's save or an atomic replace
    /// changes the inode, the size or the modification time (whose granularity is the kernel's
    /// coarse clock, a few milliseconds: two quick writes may share it).
    struct FileVersion: Equatable {
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }

    private static func version(_ path: String) -> FileVersion? {
        var s = stat()
        guard stat(path, &s) == 0 else { return nil }
        return FileVersion(inode: UInt64(s.st_ino), size: Int64(s.st_size), seconds: s.st_mtim.tv_sec, nanoseconds: s.st_mtim.tv_nsec)
    }
}
