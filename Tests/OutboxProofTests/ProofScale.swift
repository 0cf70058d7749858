import Foundation

/// How much of each proof to run: 1 in `swift test` (both proofs within about 35 s on two cores),
/// more under `make proof` (LOCGATE_PROOF_SCALE, 20 there). Sizes grow linearly.
enum ProofScale {
    static let factor: Int = max(1, Int(ProcessInfo.processInfo.environment["LOCGATE_PROOF_SCALE"] ?? "") ?? 1)

    /// The time limit of each proof: 5 minutes a unit of scale (scale 20 took 12 minutes for the
    /// longest proof on two cores shared with other builds).
    static let minutes = 5 * factor
}
