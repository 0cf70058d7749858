import Foundation

/// Every `http(s)://` address written in a page, to check it loads nothing from outside.
public func httpURLs(in html: String) -> [String] {
    var found: [String] = []
    var rest = html[...]
    while let r = rest.range(of: #"https?://[^"'\s)<]*"#, options: .regularExpression) {
        found.append(String(rest[r]))
        rest = rest[r.upperBound...]
    }
    return found
}

/// The only addresses a page with Leaflet inlined may contain: the SVG namespace name and the
/// attribution link, neither of which is fetched.
public let leafletURLs: Set<String> = ["http://www.w3.org/2000/svg", "https://leafletjs.com"]
