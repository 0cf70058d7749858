import Dispatch
import Foundation
import GatewayCore
import GatewayRuntime
import Locking

/// SIGINT/SIGTERM: the first asks the pipeline to stop gracefully, a second exits at once.
enum SignalHandling {
    /// Installs the handlers; the returned sources must stay alive while the pipeline runs.
    static func install(pipeline: Pipeline, notifier: SystemdNotifier?, logger: Logger) -> [any DispatchSourceSignal] {
        signal(SIGPIPE, SIG_IGN)
        let count = SignalCounter()
        var sources: [any DispatchSourceSignal] = []
        for (sig, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                if count.increment() > 1 {
                    logger.warning("second signal: exiting now")
                    exit(130)
                }
                logger.info("\(name): stopping (send again to exit at once)")
                notifier?.stopping(reason: name)
                pipeline.shutdown(reason: name)
            }
            source.resume()
            sources.append(source)
        }
        return sources
    }
}

extension SignalHandling {
    /// SIGHUP as a stream: one element per signal (several signals during a reload coalesce
    /// into one more reload). The returned source must stay alive while the stream is read.
    static func hangups() -> (AsyncStream<Void>, any DispatchSourceSignal) {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { continuation.yield() }
        source.resume()
        return (stream, source)
    }
}

/// SIGINT and SIGTERM counted together: the second of either exits at once.
final class SignalCounter: Sendable {
    private let value = Locked(0)
    func increment() -> Int { value.withLock { $0 += 1; return $0 } }
}
