/// What a receiver says about interference on its RF input (u-blox MON-RF / MON-HW `jammingState`).
public enum JammingState: String, Sendable, Hashable, CaseIterable {
    /// Monitoring on, no significant jamming.
    case ok
    /// Interference visible, the fix still OK.
    case warning
    /// Interference visible and no fix.
    case critical
}

/// What a receiver's spoofing detection says (u-blox NAV-STATUS `spoofDetState`).
public enum SpoofingState: String, Sendable, Hashable, CaseIterable {
    /// No spoofing indicated.
    case notIndicated = "none"
    /// Spoofing indicated.
    case indicated
    /// Multiple spoofing indications.
    case multiple
}

/// A status report from the receiver itself, as opposed to what its positions show: each becomes
/// a health event when it changes (``ReceiverHealth/report(_:device:at:into:)``).
public enum ReceiverReport: Sendable, Hashable {
    case antenna(AntennaStatus)
    case jamming(JammingState)
    case spoofing(SpoofingState)
}
