import PluginCatalog
import Foundation
import GatewayCore
import Testing

/// The package root, found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// Folders under `Plugins/`.
func pluginFolders() throws -> [String] {
    let dir = "\(packageRoot)/Plugins"
    return try FileManager.default.contentsOfDirectory(atPath: dir).filter { name in
        var isDir: ObjCBool = false
        return !name.hasPrefix(".") && FileManager.default.fileExists(atPath: "\(dir)/\(name)", isDirectory: &isDir) && isDir.boolValue
    }.sorted()
}

/// The README option table a plugin must have, generated from its `PluginInfo` (the single source of truth).
func optionTable(_ info: PluginInfo) -> String {
    func cell(_ s: String) -> String { s.replacingOccurrences(of: "|", with: "\\|") }
    var lines = ["| option | type | default | description |", "|---|---|---|---|"]
    for o in info.options {
        lines.append("| `\(o.name)` | \(cell(o.type)) | \(o.required ? "required" : cell(o.defaultValue ?? "none")) | \(cell(o.summary)) |")
    }
    return lines.joined(separator: "\n")
}

/// Rows of every markdown table of `text` whose first column header is `option` (one list per
/// table, in order), each as "name = default" with backticks stripped, so a default changed in
/// the code and not in the README (or the other way round) fails the table test.
func optionTables(in text: String) -> [[String]] {
    var tables: [[String]] = []
    var current: [String]?
    for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
        let line = raw.trimmingCharacters(in: .whitespaces)
        guard line.hasPrefix("|") else {
            if let c = current { tables.append(c); current = nil }
            continue
        }
        let cells = line.dropFirst().split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = cells.first else { continue }
        if current == nil {
            if first.lowercased() == "option" { current = [] }
            continue
        }
        if first.allSatisfy({ $0 == "-" || $0 == ":" }) { continue }
        // Cells split on unescaped pipes only: a default such as "a|b" is written `a\|b`.
        let row = line.replacingOccurrences(of: "\\|", with: "\u{1}").dropFirst()
            .split(separator: "|", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "\u{1}", with: "|") }
        let name = first.replacingOccurrences(of: "`", with: "")
        current?.append(row.count > 2 ? "\(name) = \(row[2].replacingOccurrences(of: "`", with: ""))" : name)
    }
    if let c = current { tables.append(c) }
    return tables
}

@Suite struct BuiltinPluginsTests {
    static let plugins = BuiltinPlugins.registry.all

    @Test func everyPluginFolderIsRegistered() throws {
        let registered = Set(Self.plugins.map(\.info.folder))
        for folder in try pluginFolders() {
            #expect(registered.contains(folder), "Plugins/\(folder) is not registered in Sources/PluginCatalog/BuiltinPlugins.swift")
        }
        for folder in registered {
            #expect(FileManager.default.fileExists(atPath: "\(packageRoot)/Plugins/\(folder)"), "a plugin names folder \(folder), which does not exist")
        }
    }

    @Test func typesAreSnakeCase() {
        for p in Self.plugins {
            #expect(p.info.type.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" }, "\(p.info.type)")
        }
    }

    @Test(arguments: BuiltinPlugins.registry.all.map(\.info.type).indices)
    func sampleDecodesAndAsksOnlyForDocumentedOptions(index: Int) throws {
        let plugin = Self.plugins[index]
        let info = plugin.info
        let sample = try #require(try JSONValue.parse(string: info.sample).objectValue, "\(info.type): sample is not a JSON object")
        // 1. Through the real configuration reader, inside a minimal pipeline so inputs resolve.
        var sources = #"{ "source_under_test": \#(info.sample) }"#
        var sinks = #"{ "sink_under_test": \#(info.sample) }"#
        var transforms = "{}"
        switch info.kind {
        case .source: sinks = #"{ "dummy_sink": { "type": "stdout", "inputs": ["source_under_test"] } }"#
        case .transform:
            sources = #"{ "receiver": { "type": "file", "path": "x.nmea" } }"#
            transforms = #"{ "transform_under_test": \#(info.sample) }"#
            sinks = #"{ "dummy_sink": { "type": "stdout", "inputs": ["transform_under_test"] } }"#
        case .sink: sources = #"{ "receiver": { "type": "file", "path": "x.nmea" } }"#
        }
        // Sample inputs name `receiver` (or some other id): rename them to what exists here.
        let upstream = info.kind == .source ? nil : "receiver"
        var pipeline = #"{ "sources": \#(sources), "transforms": \#(transforms), "sinks": \#(sinks) }"#
        if let upstream, let inputs = sample["inputs"]?.arrayValue, inputs.count == 1, let name = inputs[0].stringValue, name != upstream {
            pipeline = pipeline.replacingOccurrences(of: "[\"\(name)\"]", with: "[\"\(upstream)\"]")
        }
        do {
            let config = try PipelineConfiguration.load(json: Array(pipeline.utf8), registry: BuiltinPlugins.registry,
                                                        environment: ["HOME": "/root"])
            #expect(config.components.contains { $0.type == info.type })
        } catch {
            Issue.record("\(info.kind.rawValue) \(info.type): sample does not decode: \(error)")
        }
        // 2. Every key the plugin asks for is documented.
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: sample, path: "sample", diagnostics: diagnostics, environment: ["HOME": "/root"])
        reader.markKnown(PipelineConfiguration.commonKeys)
        _ = plugin.prepare(&reader)
        let documented = Set(info.options.map(\.name))
        for key in reader.askedKeys {
            // A nested object ("batch") is documented through its dotted members ("batch.interval").
            let known = documented.contains(key) || documented.contains { $0.hasPrefix(key + ".") }
            #expect(known, "\(info.type) reads option \"\(key)\", which its PluginInfo does not document")
        }
    }

    @Test(arguments: BuiltinPlugins.registry.all.map(\.info.type).indices)
    func readmeTableListsExactlyTheDocumentedOptions(index: Int) throws {
        let info = Self.plugins[index].info
        // LOCGATE_PRINT_TABLES=DIR writes each generated table to DIR/<kind>-<type>.md, to paste into a README.
        if let dir = ProcessInfo.processInfo.environment["LOCGATE_PRINT_TABLES"] {
            try optionTable(info).write(toFile: "\(dir)/\(info.kind.rawValue)-\(info.type).md", atomically: true, encoding: .utf8)
        }
        let path = "\(packageRoot)/Plugins/\(info.folder)/README.md"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let names = info.options.map { "\($0.name) = \($0.required ? "required" : $0.defaultValue ?? "none")" }
        let tables = optionTables(in: text)
        #expect(tables.contains(names), """
            Plugins/\(info.folder)/README.md has no option table for \(info.kind.rawValue) "\(info.type)" listing exactly \(names); \
            found \(tables). Generated from PluginInfo:
            \(optionTable(info))
            """)
        #expect(text.contains("## Troubleshooting"), "Plugins/\(info.folder)/README.md has no Troubleshooting section")
        #expect(text.contains(info.sample), "Plugins/\(info.folder)/README.md does not show the sample configuration verbatim")
    }
}

/// Documented defaults against the code: most defaults are declared once as an `Option`, but a
/// default that is a rule, or an option read by hand, can still drift from its `OptionSpec`
/// (which generates the README table); this checks, option by option, that writing the
/// documented default changes nothing.
@Suite struct DocumentedDefaultsTests {
    /// `object` with `value` at a dotted `name` ("batch.interval"), or the member removed when nil.
    static func setting(_ name: String, to value: JSONValue?, in object: JSONObject) -> JSONObject {
        var copy = object
        let parts = name.split(separator: ".", maxSplits: 1).map(String.init)
        if parts.count == 2 {
            let inner = copy[parts[0]]?.objectValue ?? JSONObject()
            let updated = setting(parts[1], to: value, in: inner)
            // Removing the last member of a nested object the sample did not have leaves it out.
            copy[parts[0]] = updated.isEmpty && copy[parts[0]] == nil ? nil : .object(updated)
        } else {
            copy[name] = value
        }
        return copy
    }

    /// The configuration a plugin reads from `object`, as text (every stored property, nested),
    /// and the problems reported.
    static func configuration(_ plugin: RegisteredPlugin, _ object: JSONObject) -> (String, [String]) {
        let diagnostics = ConfigurationDiagnostics()
        var reader = OptionReader(object: object, path: "x", diagnostics: diagnostics, environment: ["HOME": "/root"], baseDirectory: "/tmp")
        reader.markKnown(PipelineConfiguration.commonKeys)
        let prepared = plugin.prepare(&reader)
        var text = ""
        if let c = prepared.configuration { dump(c, to: &text) }
        return (text, diagnostics.problems.map { "\($0.path): \($0.message)" })
    }

    @Test(arguments: BuiltinPlugins.registry.all.map(\.info.type).indices)
    func writingTheDocumentedDefaultChangesNothing(index: Int) throws {
        let plugin = BuiltinPluginsTests.plugins[index]
        let info = plugin.info
        let sample = try #require(try JSONValue.parse(string: info.sample).objectValue)
        for option in info.options where !option.required {
            // Defaults that describe a rule ("<host>:<port>", "locgate-<host name>-<source id>")
            // are not values to write.
            guard let text = option.defaultValue, !text.contains("<"), let value = try? JSONValue.parse(string: text) else { continue }
            // A member of an optional object ("tls.verify", "stream.replicas") has its default only
            // once the object is there: writing it alone would turn the object on.
            if let dot = option.name.firstIndex(of: "."), sample[String(option.name[..<dot])] == nil { continue }
            let (left, leftProblems) = Self.configuration(plugin, sample.removing(option.name))
            let (written, writtenProblems) = Self.configuration(plugin, Self.setting(option.name, to: value, in: sample))
            // An option that applies only with another's value ("body.template" with format
            // "template") says so when written alone; its default is checked by the plugin's tests.
            if writtenProblems.contains(where: { $0.contains("only used with") }) { continue }
            #expect(!left.isEmpty, "\(info.type): the plugin keeps no configuration value to compare")
            #expect(writtenProblems == leftProblems, "\(info.type).\(option.name): writing the documented default \(text) is reported: \(writtenProblems)")
            // Lines compared as a multiset: sets dump their members in per-instance order.
            let l = left.split(separator: "\n").sorted(), w = written.split(separator: "\n").sorted()
            let onlyLeft = l.filter { !w.contains($0) }.map { $0.trimmingCharacters(in: .whitespaces) }
            let onlyWritten = w.filter { !l.contains($0) }.map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(l == w, "\(info.type).\(option.name): documented default \(text) differs from leaving it out: \(onlyLeft.prefix(3)) ≠ \(onlyWritten.prefix(3))")
        }
    }
}

extension JSONObject {
    /// A copy without the member at a dotted `name`.
    func removing(_ name: String) -> JSONObject { DocumentedDefaultsTests.setting(name, to: nil, in: self) }
}
