/// An HTTP request as a handler sees it: complete, its body included.
public struct HTTPRequest: Sendable {
    /// The method as the client sent it: `GET`, `POST`, …
    public var method: String
    /// The path, without the query string.
    public var path: String
    /// Header values by lowercased name (the last one wins when a header repeats).
    public var headers: [String: String]
    /// Query string arguments, decoded (the last one wins when an argument repeats).
    public var query: [String: String]
    /// Cookies by name.
    public var cookies: [String: String]
    /// The request body, empty when there is none; never longer than the server's
    /// ``HTTPServer/Limits/maximumBodySize``.
    public var body: [UInt8]
    /// The client's address without its port (`192.0.2.7`, `2001:db8::7`); empty when unknown.
    public var peerAddress: String

    /// A request as given (tests build them; the server fills every field).
    public init(method: String, path: String, headers: [String: String] = [:], query: [String: String] = [:],
                cookies: [String: String] = [:], body: [UInt8] = [], peerAddress: String = "") {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.cookies = cookies
        self.body = body
        self.peerAddress = peerAddress
    }
}
