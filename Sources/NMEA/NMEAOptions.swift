import GatewayCore

/// Settings shared by every source that reads NMEA 0183.
public struct NMEAOptions: Sendable {
    /// Reject sentences without a `*HH` checksum (`missingChecksum`); some old receivers send none.
    public var requireChecksum = true
    /// Longest line accepted, counting from `$` up to the checksum, without the line ending.
    ///
    /// NMEA allows 82 characters, but real receivers send longer proprietary lines, so the
    /// default leaves room. Longer lines are counted as `tooLong` and skipped.
    public var maxSentenceLength = 256
    /// Component id written into every position's `source`.
    public var source = ""
    /// Device id written into every position's `device`.
    public var device: String? = nil
    /// Prefix of every position's `id`, to keep ids of different sources apart.
    public var idPrefix = ""
    /// For fixes without a time: ids become `idPrefix + "n" + token + "-" + count`. Live sources set
    /// a ``RunToken`` so those ids never repeat after a reconnect or restart; replays leave it nil
    /// so a replay reproduces its ids (`idPrefix + "n" + count`).
    public var untimedToken: String? = nil

    /// Creates the default options.
    public init() {}

    /// The options of a live source (one that reconnects or restarts): positions labelled
    /// `source` and `device`, ids prefixed `idPrefix` (default `<source>-`), fixes without a time
    /// numbered under a fresh ``RunToken``.
    public static func live(source: String, device: String?, requireChecksum: Bool = true, idPrefix: String? = nil) -> NMEAOptions {
        var options = NMEAOptions()
        options.requireChecksum = requireChecksum
        options.source = source
        options.device = device
        options.idPrefix = idPrefix ?? "\(source)-"
        options.untimedToken = RunToken.next()
        return options
    }
}
