import Foundation

/// How much of each proof to run: 1 in `swift test` (both proofs within about a minute on two
/// cores), more under `make proof` (LOCGATE_PROOF_SCALE, default 20 there). Sizes grow linearly.
enum ProofScale {
    static let factor: Int = max(1, Int(ProcessInfo.processInfo.environment["LOCGATE_PROOF_SCALE"] ?? "") ?? 1)
}
