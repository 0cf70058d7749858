import TrackerProtocols

/// Decides what a protocol's registration, authentication and deregistration frames ask
/// (``TrackerMessage/admission(_:)``, JT/T 808): who gets an authentication code, whose code is
/// right, and which frames are taken from a device that has not authenticated.
///
/// Implementation requirements:
/// - ``decide(_:entry:authenticated:decided:)`` is called on the I/O loop's thread and must not block it: a
///   decision that needs a durable write (a code issued) calls `decided` once the write is
///   durable, from any thread. It calls `decided` exactly once.
/// - A device the directory refused comes with a nil `entry`: refuse it.
/// - A deregistration gives a registration up only when it comes from the device itself
///   (`authenticated`: on the connection that authenticated as it); anyone can name a device.
/// - ``admitsUnauthenticated(_:overDatagrams:)`` is cheap (called per frame).
public protocol DeviceAdmissions: Sendable {
    /// Decides `admission`, for the device `entry` (nil: not in `devices`). `authenticated`:
    /// it comes on a connection that authenticated as the device (never over UDP).
    func decide(_ admission: TrackerAdmission, entry: DeviceEntry?, authenticated: Bool,
                decided: @escaping @Sendable (TrackerAdmissionVerdict) -> Void)

    /// Whether a frame naming `deviceID` is taken from a connection that has not authenticated
    /// as that device; over UDP (`overDatagrams`), where nothing is a connection, whether the
    /// device's frames are taken at all.
    func admitsUnauthenticated(_ deviceID: String, overDatagrams: Bool) -> Bool
}
