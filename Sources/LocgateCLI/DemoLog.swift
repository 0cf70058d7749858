/// The demo pipeline's input: a real receiver log from gpsd's regression suite (BSD-2-Clause,
/// see Tests/NMEATests/Fixtures/gpsd/LICENSES): bundg_zeus_9.log, a B&G Zeus 9 chart plotter on a
/// boat on the IJsselmeer, 2.5 minutes; only its GPS position sentences are kept (satellites in
/// view and the other instruments' wind, depth and heading sentences are left out to keep the
/// binary small).
///
/// The log is `Resources/demo-bundg_zeus_9.nmea`, embedded in the binary at build time
/// (`.embedInCode`): an installed `locgate` has no resource bundle beside it to read at run time.
enum DemoLog {
    static let name = "bundg_zeus_9.log"
    static var bytes: [UInt8] { PackageResources.demo_bundg_zeus_9_nmea }
}
