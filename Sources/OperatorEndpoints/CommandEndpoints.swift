import GatewayCore
import HTTPServing

/// Who called the API: a token's name and the command types it may submit (every one when nil).
struct APICaller: Sendable, Hashable {
    var name: String
    var commandTypes: Set<CommandType>?

    func may(_ type: CommandType) -> Bool { commandTypes?.contains(type) ?? true }
}

/// The operator API's commands to devices:
///
/// | request | answer |
/// |---|---|
/// | `POST /devices/{device}/commands` with `{"type": "set_interval", "interval": "20s"}` | `201` and the command |
/// | `GET /devices/{device}/commands` | `200 {"commands": [...]}`, newest first |
/// | `GET /commands/{id}` | `200` and the command |
/// | `DELETE /commands/{id}` | `200` and the command, cancelled (only before it was delivered) |
///
/// A bad body is `400` with every problem, an unknown device or command `404`, a type the
/// device's protocol cannot carry `422`, a type the token may not send `403`, a cancellation of a
/// delivered command `409`, a body over 64 KiB `413`.
extension OperatorAPI {
    /// The largest command body read.
    static let maximumCommandBody = 65_536

    /// The answer to a commands request, or nil when the path is not one.
    func handleCommands(_ request: HTTPRequest, caller: APICaller) -> HTTPResponse? {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let device: String?, id: String?
        if parts.count >= 4, parts[1] == "devices", parts.last == "commands", !parts[2].isEmpty {
            // The server hands the path decoded: a device named `user/phone` (OwnTracks) is
            // `/devices/user/phone/commands`, or with %2F.
            (device, id) = (parts[2..<(parts.count - 1)].joined(separator: "/"), nil)
        } else if parts.count == 3, parts[1] == "commands", !parts[2].isEmpty {
            (device, id) = (nil, parts[2])
        } else {
            return nil
        }
        guard let commands else { return text(404, "this gateway keeps no commands: no source carries them (settings.commands)\n") }
        switch (request.method, device, id) {
        case ("POST", let device?, nil):
            return submit(request, device: device, caller: caller, to: commands)
        case ("GET", let device?, nil), ("HEAD", let device?, nil):
            guard commands.isKnown(device: device) else { return problem(.unknownDevice(device)) }
            var out = Array(#"{"commands":["#.utf8)
            for (i, c) in commands.commands(device: device).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out += Array(c.json.jsonText.utf8)
            }
            return json(200, out + Array("]}\n".utf8))
        case ("GET", nil, let id?), ("HEAD", nil, let id?):
            guard let c = commands.command(id) else { return problem(.notFound(id)) }
            return json(200, Array((c.json.jsonText + "\n").utf8))
        case ("DELETE", nil, let id?):
            guard let c = commands.command(id) else { return problem(.notFound(id)) }
            guard caller.may(c.type) else { return forbidden(caller, c.type) }
            do {
                let cancelled = try commands.cancel(id, by: caller.name)
                return json(200, Array((cancelled.json.jsonText + "\n").utf8))
            } catch {
                return problem(error)
            }
        default:
            let allowed = device == nil ? "GET, HEAD, DELETE" : "GET, HEAD, POST"
            return text(405, "\(request.method) is not allowed here: \(allowed)\n", headers: [("Allow", allowed)])
        }
    }

    private func submit(_ request: HTTPRequest, device: String, caller: APICaller, to commands: any CommandCenter) -> HTTPResponse {
        guard request.body.count <= Self.maximumCommandBody else {
            return text(413, "a command body is at most \(Self.maximumCommandBody) bytes\n")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(request.body) } catch {
            return problem(.invalid(["the body is not JSON: \(error)"]))
        }
        do {
            let parsed = try CommandRequest.parse(value, device: device, submittedBy: caller.name)
            guard caller.may(parsed.type) else { return forbidden(caller, parsed.type) }
            let command = try commands.submit(parsed)
            return HTTPResponse(status: 201, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store"),
                                                       ("Location", "/commands/\(command.id)")],
                                body: Array((command.json.jsonText + "\n").utf8))
        } catch {
            return problem(error)
        }
    }

    private func forbidden(_ caller: APICaller, _ type: CommandType) -> HTTPResponse {
        problemBody(403, ["type \(type.rawValue): the token \"\(caller.name)\" may not send it (api.tokens.\(caller.name).commands)"])
    }

    private func problem(_ error: CommandError) -> HTTPResponse { problemBody(error.httpStatus, error.problems) }

    private func problemBody(_ status: Int, _ problems: [String]) -> HTTPResponse {
        json(status, Array((JSONValue.object(JSONObject([("problems", .array(problems.map { .string($0) }))])).jsonText + "\n").utf8))
    }
}
