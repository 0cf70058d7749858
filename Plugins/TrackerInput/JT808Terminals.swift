import Dispatch
import DeviceIntake
import GatewayCore
import Locking
import TrackerProtocols

/// The `jt808` source's registrations: the authentication code issued to each terminal, kept in
/// the per-device state store so that a terminal authenticating after a restart (or, with
/// `state.nats`, at another gateway) is recognised.
///
/// One record per terminal, under the source's id (`sources.<id>`, format `jt808-terminal/1`):
/// `{"code": …, "terminal": …}`, the code and what the terminal said it is when it registered.
/// A registration is answered only once its record is durable (a code the store lost would lock
/// the terminal out); a store that fails gets no answer, and the terminal registers again.
/// `locgate state forget CONFIG <terminal number>` forgets a registration (a replaced terminal
/// under the same number is refused with "already registered" until then).
final class JT808Terminals: DeviceAdmissions {
    /// How authentication codes are issued and checked: the `auth` option.
    enum Mode: String, Sendable, Hashable, CaseIterable {
        /// A random code per terminal, kept in the state store; only that code authenticates.
        case issued
        /// The terminal's phone digits are its code, issued and checked without a store (what
        /// Traccar issues: terminals registered with it authenticate unchanged).
        case phone
        /// Any code authenticates, and frames are taken from terminals that never authenticated
        /// (fleets whose terminals were registered with another platform).
        case any
    }

    struct Terminal: Sendable, Hashable {
        var code: String
        var terminal: String
        var updated: Int64
    }

    private struct State {
        var terminals: [String: Terminal] = [:]
        /// Registrations whose record is being written, and who waits for each.
        var writing: [String: (terminal: Terminal, waiting: [@Sendable (TrackerAdmissionVerdict) -> Void])] = [:]
    }

    static let format = "jt808-terminal/1"
    /// Terminals kept in memory at most; past it the cache starts again and misses read the store.
    static let cacheLimit = 100_000
    /// An authentication rewrites its record when it is older than this, so `state.max_age` only
    /// forgets terminals that stopped authenticating.
    static let refreshMilliseconds: Int64 = 86_400_000

    let mode: Mode
    let store: (any DeviceStateStore)?
    /// The record's "transform" column: `sources.<id>`.
    let key: String
    private let state = Locked(State())
    private let logger: Logger
    private let stats: ComponentStats
    private let clock: any GatewayClock
    private let makeCode: @Sendable () -> String
    private static let sequence = Locked<UInt64>(0)

    /// Loads every registration of the source from `store`.
    init(mode: Mode, store: (any DeviceStateStore)?, key: String, context: ComponentContext,
         makeCode: @escaping @Sendable () -> String = JT808Terminals.randomCode) {
        self.mode = mode
        self.store = store
        self.key = key
        logger = context.logger
        stats = context.stats
        clock = context.clock
        self.makeCode = makeCode
        guard mode == .issued || mode == .any else { return }
        guard let store else {
            logger.warning("authentication codes are kept in memory only: after a restart every terminal must register again (set settings.state.path, or give a sink a durable queue)")
            return
        }
        do {
            var loaded: [String: Terminal] = [:]
            for record in try store.load(transform: key) where record.format == Self.format {
                if let terminal = Self.terminal(record) { loaded[record.device] = terminal }
            }
            state.withLock { $0.terminals = loaded }
            logger.info("\(loaded.count) registered terminal(s) in \(store.location)")
        } catch {
            logger.error("cannot read the registered terminals from \(store.location) (they register again): \(error)")
        }
        stats.gauge("terminals.registered") { [weak self] in self?.state.withLock { $0.terminals.count } ?? 0 }
    }

    /// 16 characters of 0–9 and A–Z from the system's random source.
    static func randomCode() -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        var generator = SystemRandomNumberGenerator()
        return String(decoding: (0..<16).map { _ in alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))] }, as: UTF8.self)
    }

    // MARK: - DeviceAdmissions

    func admitsUnauthenticated(_ deviceID: String, overDatagrams: Bool) -> Bool {
        switch mode {
        case .any: return true
        case .phone: return overDatagrams
        case .issued: return overDatagrams && registered(deviceID) != nil
        }
    }

    func decide(_ admission: TrackerAdmission, entry: DeviceEntry?, decided: @escaping @Sendable (TrackerAdmissionVerdict) -> Void) {
        guard entry != nil else { return decided(.refused(.unknownDevice)) }
        let device = admission.deviceID
        switch admission.request {
        case .register(let terminal):
            register(device, terminal: terminal, admission: admission, decided: decided)
        case .authenticate(let code):
            authenticate(device, code: code, admission: admission, decided: decided)
        case .deregister:
            if mode != .phone, state.withLock({ $0.terminals.removeValue(forKey: device) }) != nil {
                write(device, nil, lazily: true) { _ in }
            }
            decided(.deregistered)
        }
    }

    // MARK: - Registration

    private func register(_ device: String, terminal: String, admission: TrackerAdmission,
                          decided: @escaping @Sendable (TrackerAdmissionVerdict) -> Void) {
        if mode == .phone {
            return decided(JT808Codec.phoneCode(admission).map { .registered(code: $0) } ?? .refused(.unavailable))
        }
        let now = clock.now().milliseconds
        enum Step { case answer(TrackerAdmissionVerdict), wait, write(Terminal) }
        let step: Step = state.withLock { s in
            if let pending = s.writing[device] {
                guard pending.terminal.terminal == terminal else { return .answer(.refused(.alreadyRegistered)) }
                s.writing[device]?.waiting.append(decided)
                return .wait
            }
            if let known = s.terminals[device] {
                // The same terminal registering again (its answer was lost, or it was reset)
                // gets the code it has; another one under the same number is refused.
                return known.terminal == terminal ? .answer(.registered(code: known.code)) : .answer(.refused(.alreadyRegistered))
            }
            let issued = Terminal(code: makeCode(), terminal: terminal, updated: now)
            guard store != nil else {
                remember(device, issued, in: &s)
                return .answer(.registered(code: issued.code))
            }
            s.writing[device] = (issued, [decided])
            return .write(issued)
        }
        switch step {
        case .answer(let verdict):
            if case .refused(.alreadyRegistered) = verdict {
                logger.warning("terminal \(device) registered as \"\(terminal)\", but another terminal is registered under that number: refused (locgate state forget CONFIG \(device) lets it register)")
            }
            decided(verdict)
        case .wait:
            break
        case .write(let issued):
            write(device, issued, lazily: false) { [self] error in
                let waiting: [@Sendable (TrackerAdmissionVerdict) -> Void] = state.withLock { s in
                    let waiting = s.writing.removeValue(forKey: device)?.waiting ?? []
                    if error == nil { remember(device, issued, in: &s) }
                    return waiting
                }
                if let error { logger.error("cannot store the registration of terminal \(device) (not answered; it registers again): \(error)") }
                let verdict: TrackerAdmissionVerdict = error == nil ? .registered(code: issued.code) : .refused(.unavailable)
                for w in waiting { w(verdict) }
            }
        }
    }

    private func remember(_ device: String, _ terminal: Terminal, in s: inout State) {
        if s.terminals.count >= Self.cacheLimit && s.terminals[device] == nil { s.terminals.removeAll() }
        s.terminals[device] = terminal
    }

    // MARK: - Authentication

    private func authenticate(_ device: String, code: String, admission: TrackerAdmission,
                              decided: @escaping @Sendable (TrackerAdmissionVerdict) -> Void) {
        switch mode {
        case .any:
            return decided(.authenticated)
        case .phone:
            return decided(code == JT808Codec.phoneCode(admission) ? .authenticated : .refused(.wrongCode))
        case .issued:
            break
        }
        if let known = registered(device) {
            return decided(check(device, known, code))
        }
        guard let store else { return decided(.refused(.wrongCode)) }
        // Not in memory: a shared store another gateway registered it in, or the cache started
        // again. Read off the loop's thread.
        DispatchQueue.global().async { [self] in
            let record = try? store.load(transform: key, device: device)
            guard let record, record.format == Self.format, let known = Self.terminal(record) else {
                return decided(.refused(.wrongCode))
            }
            state.withLock { remember(device, known, in: &$0) }
            decided(check(device, known, code))
        }
    }

    /// The verdict on `code`; a good one older than a day is written again.
    private func check(_ device: String, _ known: Terminal, _ code: String) -> TrackerAdmissionVerdict {
        guard known.code == code else { return .refused(.wrongCode) }
        let now = clock.now().milliseconds
        if now - known.updated > Self.refreshMilliseconds {
            var refreshed = known
            refreshed.updated = now
            state.withLock { $0.terminals[device] = refreshed }
            write(device, refreshed, lazily: true) { _ in }
        }
        return .authenticated
    }

    func registered(_ device: String) -> Terminal? {
        state.withLock { $0.terminals[device] }
    }

    // MARK: - Store

    private func write(_ device: String, _ terminal: Terminal?, lazily: Bool, completion: @escaping @Sendable ((any Error)?) -> Void) {
        guard let store else { return completion(nil) }
        let value: JSONValue? = terminal.map { .object(JSONObject([("code", .string($0.code)), ("terminal", .string($0.terminal))])) }
        let record = DeviceStateRecord(transform: key, device: device, format: Self.format, state: value)
        let sequence = Self.sequence.withLock { n -> UInt64 in
            n += 1
            return n
        }
        let done: @Sendable ((any Error)?) -> Void = { [stats] error in
            stats.count(error == nil ? "state.writes" : "state.errors")
            completion(error)
        }
        if lazily { store.writeLazily([record], sequence: sequence, completion: done) } else { store.write([record], sequence: sequence, completion: done) }
    }

    static func terminal(_ record: DeviceStateRecord) -> Terminal? {
        guard case .object(let o)? = record.state, case .string(let code)? = o["code"], !code.isEmpty else { return nil }
        let terminal: String = if case .string(let t)? = o["terminal"] { t } else { "" }
        return Terminal(code: code, terminal: terminal, updated: record.updatedMilliseconds)
    }
}
