import GatewayCore
import ReceiverStream
import UBX

/// The receiver's port as the configurator uses it (the serial source's port, a test's pipe).
public protocol ReceiverLink {
    /// Writes all of `bytes`; throws when the port fails.
    func write(_ bytes: [UInt8]) async throws
    /// What arrives within `timeout`, as soon as something does; empty when nothing came.
    func read(timeout: Duration) async throws -> [UInt8]
}

/// Sends a source's UBX configuration messages at open (and after every reconnect) and reports
/// what the receiver said to each: ACK-ACK, ACK-NAK, no answer.
///
/// What the receiver sends meanwhile goes through the source's own decoder, so the positions of
/// those seconds are kept (returned in `positions`) and its health reports stay queued in it.
/// Nothing is sent that the configuration does not list: no probe, no poll.
public enum ReceiverConfigurator {
    /// Runs the exchange; returns one outcome per command, in order.
    public static func run(
        _ commands: [UBXCommand], link: some ReceiverLink, decoder: inout ReceiverStreamDecoder,
        positions: inout [Position], clock: any GatewayClock, logger: Logger, stats: ComponentStats? = nil
    ) async throws -> [UBXCommandOutcome] {
        var exchange = UBXConfigExchange(commands: commands)
        var action = exchange.start()
        loop: while true {
            switch action {
            case .finished:
                break loop
            case .write(let index, let frame):
                do {
                    try await link.write(frame)
                    action = exchange.written(at: clock.now())
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    logger.warning("\(commands[index].label): writing \(commands[index].message) failed: \(error)")
                    action = exchange.writeFailed()
                }
            case .wait(let until):
                let left = until.milliseconds - clock.now().milliseconds
                if left > 0 {
                    let bytes = try await link.read(timeout: .milliseconds(left))
                    if !bytes.isEmpty {
                        bytes.withUnsafeBytes { decoder.decode($0, into: &positions) }
                        let now = clock.now()
                        for ack in decoder.takeAcknowledgements() { action = exchange.received(ack, at: now) }
                    }
                }
                if case .wait = action { action = exchange.timePassed(now: clock.now()) }
            }
        }
        let outcomes = exchange.outcomes.map { $0 ?? .notWritten }
        for (command, outcome) in zip(commands, outcomes) {
            report(command, outcome, logger: logger)
            stats?.count("ubx_config_\(outcome.word)")
        }
        return outcomes
    }

    static func report(_ c: UBXCommand, _ outcome: UBXCommandOutcome, logger: Logger) {
        switch outcome {
        case .acknowledged(let elapsed):
            logger.info("\(c.label): \(c.summary): ACK-ACK in \(elapsed.milliseconds) ms")
        case .rejected:
            logger.warning("\(c.label): \(c.summary): ACK-NAK — the receiver refused it (a key its firmware does not have, a value out of range, or a layer it lacks such as flash)")
        case .noAnswer:
            logger.warning("\(c.label): \(c.summary): no ACK within \(DurationText.format(c.timeout)) (is UBX input enabled on this port, the baud right, the receiver a u-blox generation 9+ for CFG-VALSET?)")
        case .sent:
            logger.info("\(c.label): \(c.summary): written (not a message the receiver acknowledges)")
        case .notWritten:
            logger.warning("\(c.label): \(c.summary): not written (the port failed)")
        }
    }
}
