import Foundation

/// Why the Leaflet files could not be read.
public struct LeafletAssetsError: Error, CustomStringConvertible {
    public var description: String
}

/// Leaflet's script and stylesheet from Debian's `libjs-leaflet`, made self-contained.
///
/// The stylesheet's `url(images/…)` references become `data:` URIs and the source-map comments
/// are dropped, so a page that inlines both loads nothing from anywhere. The remaining `http`
/// strings in Leaflet's code are the SVG namespace name and the "Leaflet" attribution link,
/// neither of which is fetched (the page turns the attribution prefix off).
public struct LeafletAssets: Sendable {
    /// Where Debian's `libjs-leaflet` installs Leaflet.
    public static let debianDirectory = "/usr/share/javascript/leaflet"

    /// Leaflet's JavaScript.
    public let script: String
    /// Leaflet's CSS with its images inlined.
    public let stylesheet: String

    /// Reads the files from `directory` (the minified script when present).
    public init(directory: String = LeafletAssets.debianDirectory) throws {
        let fm = FileManager.default
        guard let js = fm.contents(atPath: directory + "/leaflet.min.js") ?? fm.contents(atPath: directory + "/leaflet.js") else {
            throw LeafletAssetsError(description: "cannot read Leaflet from \(directory)/leaflet.js: install Debian's libjs-leaflet (apt-get install libjs-leaflet)")
        }
        guard let css = fm.contents(atPath: directory + "/leaflet.css") else {
            throw LeafletAssetsError(description: "cannot read \(directory)/leaflet.css: install Debian's libjs-leaflet (apt-get install libjs-leaflet)")
        }
        script = String(decoding: js, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("sourceMappingURL=") }
            .joined(separator: "\n")
        let sheet = String(decoding: css, as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("sourceMappingURL=") }
            .joined(separator: "\n")
        stylesheet = Self.inlineImages(sheet, directory: directory + "/images")
    }

    /// Replaces each `url(images/NAME)` whose file exists by a base64 `data:` URI.
    static func inlineImages(_ css: String, directory: String) -> String {
        var out = ""
        var rest = Substring(css)
        let marker = "url(images/"
        while let start = rest.range(of: marker) {
            out += rest[..<start.lowerBound]
            guard let close = rest[start.upperBound...].firstIndex(of: ")") else { break }
            let name = String(rest[start.upperBound..<close])
            if !name.contains("/"), let data = FileManager.default.contents(atPath: "\(directory)/\(name)") {
                let type = name.hasSuffix(".svg") ? "image/svg+xml" : "image/png"
                out += "url(data:\(type);base64,\(data.base64EncodedString()))"
            } else {
                out += rest[start.lowerBound...close]
            }
            rest = rest[rest.index(after: close)...]
        }
        out += rest
        return out
    }
}
