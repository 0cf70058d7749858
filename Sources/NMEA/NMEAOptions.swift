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
}
