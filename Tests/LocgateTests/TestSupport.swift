import Foundation
import GatewayTesting

/// A receiver log from gpsd's regression suite (Tests/NMEATests/Fixtures/gpsd).
func gpsdFixture(_ name: String) -> URL {
    LocgateBinary.packageRoot.appendingPathComponent("Tests/NMEATests/Fixtures/gpsd/\(name)")
}
