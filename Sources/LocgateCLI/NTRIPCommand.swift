import Foundation
import GatewayCore
import NTRIP
import SystemIO

/// `locgate ntrip sourcetable URL`: what a caster offers, one mountpoint a line.
enum NTRIPCommand {
    static let usage = """
    usage: locgate ntrip sourcetable URL [--user USER] [--password PASSWORD] [--ntrip-version 1|2] [--raw]
      URL: ntrip://[USER[:PASSWORD]@]HOST[:PORT] (port 2101 when left out); the password also
      from the environment variable NTRIP_PASSWORD. --raw prints the table as the caster sent it.
    """

    static func run(_ args: [String]) async {
        var args = args
        guard args.first == "sourcetable" else { LocgateCommand.fail(usage, code: 2) }
        args.removeFirst()
        let user = LocgateCommand.takeOption("--user", from: &args)
        let password = LocgateCommand.takeOption("--password", from: &args) ?? ProcessInfo.processInfo.environment["NTRIP_PASSWORD"]
        let versionText = LocgateCommand.takeOption("--ntrip-version", from: &args)
        let raw = args.contains("--raw")
        args.removeAll { $0 == "--raw" }
        guard args.count == 1, !args[0].hasPrefix("-") else { LocgateCommand.fail(usage, code: 2) }
        var c: NTRIPConfiguration
        switch NTRIPConfiguration.parse(url: args[0]) {
        case .success(let parsed): c = parsed
        case .failure(let problem): LocgateCommand.fail("\(args[0]): \(problem)", code: 2)
        }
        if let user { c.user = user }
        if let password {
            c.password = password
            Redaction.register(password)
            if c.user == nil { LocgateCommand.fail("a password needs a user (--user or USER@ in the URL)", code: 2) }
        }
        if let versionText {
            guard let v = Int(versionText), v == 1 || v == 2 else { LocgateCommand.fail("--ntrip-version expects 1 or 2", code: 2) }
            c.version = v
        }
        c.mountpoint = ""
        let table: NTRIPSourcetable
        do {
            table = try await NTRIPSourcetableRequest.fetch(c, wakeup: try Wakeup(), timeout: .seconds(30))
        } catch {
            LocgateCommand.fail("\(c.display): \(error)", code: 1)
        }
        if raw {
            print(table.text, terminator: "")
            return
        }
        print(render(table), terminator: "")
    }

    /// One line per mountpoint, aligned: what a user picks a mountpoint by.
    static func render(_ table: NTRIPSourcetable) -> String {
        let header = ["MOUNTPOINT", "FORMAT", "SYSTEMS", "COUNTRY", "LAT", "LON", "NMEA", "AUTH", "FEE", "IDENTIFIER"]
        var rows = [header]
        for s in table.streams {
            rows.append([s.mountpoint, s.format, s.navSystem, s.country,
                         s.latitude.map { String(format: "%.2f", $0) } ?? "", s.longitude.map { String(format: "%.2f", $0) } ?? "",
                         s.wantsNMEA ? "yes" : "no", s.authentication, s.fee ? "yes" : "no", s.identifier])
        }
        let widths = (0..<header.count).map { i in rows.map { $0[i].count }.max() ?? 0 }
        var out = rows.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n") + "\n"
        out += "\(table.streams.count) mountpoint\(table.streams.count == 1 ? "" : "s")\(table.complete ? "" : " (the table ended without ENDSOURCETABLE)")\n"
        return out
    }
}
