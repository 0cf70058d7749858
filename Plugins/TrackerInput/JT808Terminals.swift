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
///
/// The memory is a cache of the store, which a fleet's gateways share: a registration reads the
/// store first (the terminal may have registered at another gateway), a code that does not
/// match the one in memory is checked against the store before it is refused (another gateway
/// may have issued a new one), and over UDP a terminal unknown here has its record read so that
/// its next datagram is taken. Only the terminal itself deregisters: a 0x0003 from a connection
/// that has not authenticated as it (or over UDP) is refused, unless `auth` is `any`.
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
        /// Registrations whose record is being read or written, and who waits for each.
        var writing: [String: (terminal: Terminal, waiting: [@Sendable (TrackerAdmissionVerdict) -> Void])] = [:]
        /// When the record of a terminal unknown here was last read for a datagram.
        var reads: [String: Int64] = [:]
    }

    static let format = "jt808-terminal/1"
    /// Terminals kept in memory at most; past it the cache starts again and misses read the store.
    static let cacheLimit = 100_000
    /// An authentication rewrites its record when it is older than this, so `state.max_age` only
    /// forgets terminals that stopped authenticating.
    static let refreshMilliseconds: Int64 = 86_400_000
    /// A datagram of a terminal unknown here reads its record at most this often.
    static let rereadMilliseconds: Int64 = 2_000
    /// Terminals unknown here whose record was read within ``rereadMilliseconds``, at most.
    static let maxReads = 1_024

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
        case .issued:
            guard overDatagrams else { return false }
            if registered(deviceID) != nil { return true }
            readRecord(deviceID)
            return false
        }
    }

    func decide(_ admission: TrackerAdmission, entry: DeviceEntry?, authenticated: Bool,
                decided: @escaping @Sendable (TrackerAdmissionVerdict) -> Void) {
        guard entry != nil else { return decided(.refused(.unknownDevice)) }
        let device = admission.deviceID
        switch admission.request {
        case .register(let terminal):
            register(device, terminal: terminal, admission: admission, decided: decided)
        case .authenticate(let code):
            authenticate(device, code: code, admission: admission, decided: decided)
        case .deregister:
            // Anyone can send a terminal's number: only the terminal itself gives its code up.
            guard authenticated || mode == .any else { return decided(.refused(.notAuthenticated)) }
            if mode != .phone, state.withLock({ $0.terminals.removeValue(forKey: device) }) != nil {
                write(device, nil, lazily: true) { _ in }
            }
            decided(.deregistered)
        }
    }

    // MARK: - Registration

    /// A registration: the code the store holds for the same terminal (this gateway's, or
    /// another's of the fleet: the store is read first, since the memory may be stale), else a
    /// new one, answered once it is durable.
    private func register(_ device: String, terminal: String, admission: TrackerAdmission,
                          decided: @escaping @Sendable (TrackerAdmissionVerdict) -> Void) {
        if mode == .phone {
            return decided(JT808Codec.phoneCode(admission).map { .registered(code: $0) } ?? .refused(.unavailable))
        }
        let now = clock.now().milliseconds
        enum Step { case answer(TrackerAdmissionVerdict), wait, read(Terminal) }
        let step: Step = state.withLock { s in
            if let pending = s.writing[device] {
                guard pending.terminal.terminal == terminal else { return .answer(.refused(.alreadyRegistered)) }
                s.writing[device]?.waiting.append(decided)
                return .wait
            }
            guard store != nil else {
                if let known = s.terminals[device] {
                    // The same terminal registering again (its answer was lost, or it was reset)
                    // gets the code it has; another one under the same number is refused.
                    return known.terminal == terminal ? .answer(.registered(code: known.code)) : .answer(.refused(.alreadyRegistered))
                }
                let issued = Terminal(code: makeCode(), terminal: terminal, updated: now)
                remember(device, issued, in: &s)
                return .answer(.registered(code: issued.code))
            }
            let issued = Terminal(code: makeCode(), terminal: terminal, updated: now)
            s.writing[device] = (issued, [decided])
            return .read(issued)
        }
        switch step {
        case .answer(let verdict):
            if case .refused(.alreadyRegistered) = verdict { warnAlreadyRegistered(device, terminal) }
            decided(verdict)
        case .wait:
            break
        case .read(let issued):
            guard let store else { return }
            DispatchQueue.global().async { [self] in
                let known: Terminal?
                do {
                    known = try store.load(transform: key, device: device).flatMap { $0.format == Self.format ? Self.terminal($0) : nil }
                } catch {
                    logger.error("cannot read the registration of terminal \(device) (not answered; it registers again): \(error)")
                    return finishRegistration(device, nil, .refused(.unavailable))
                }
                guard let known else { return issue(device, issued) }
                // Registered before, here or at another gateway of the fleet: the same terminal
                // gets the code it has; another one under the same number is refused.
                guard known.terminal == terminal else {
                    warnAlreadyRegistered(device, terminal)
                    return finishRegistration(device, known, .refused(.alreadyRegistered))
                }
                finishRegistration(device, known, .registered(code: known.code))
            }
        }
    }

    /// Writes a new registration and answers who waits for it once it is durable.
    private func issue(_ device: String, _ issued: Terminal) {
        write(device, issued, lazily: false) { [self] error in
            if let error { logger.error("cannot store the registration of terminal \(device) (not answered; it registers again): \(error)") }
            finishRegistration(device, error == nil ? issued : nil, error == nil ? .registered(code: issued.code) : .refused(.unavailable))
        }
    }

    /// Remembers `known` (when given) and answers every registration waiting for `device`.
    private func finishRegistration(_ device: String, _ known: Terminal?, _ verdict: TrackerAdmissionVerdict) {
        let waiting: [@Sendable (TrackerAdmissionVerdict) -> Void] = state.withLock { s in
            let waiting = s.writing.removeValue(forKey: device)?.waiting ?? []
            if let known { remember(device, known, in: &s) }
            return waiting
        }
        for w in waiting { w(verdict) }
    }

    private func warnAlreadyRegistered(_ device: String, _ terminal: String) {
        logger.warning("terminal \(device) registered as \"\(terminal)\", but another terminal is registered under that number: refused (locgate state forget CONFIG \(device) lets it register)")
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
        let known = registered(device)
        if let known, known.code == code { return decided(check(device, known, code)) }
        guard let store else { return decided(.refused(.wrongCode)) }
        // Not in memory, or another code: before it is refused, the store is read (another
        // gateway of the fleet may have registered it, or issued it a new code), off the loop's thread.
        DispatchQueue.global().async { [self] in
            // A store that cannot be read gets no answer: the terminal authenticates again.
            guard let stored = readStored(device, store: store) else { return decided(.refused(.unavailable)) }
            decided(stored.map { check(device, $0, code) } ?? .refused(.wrongCode))
        }
    }

    /// The store's record of `device` (`.some(nil)`: it has none, and the memory forgets it too);
    /// nil when the store cannot be read. Remembers what it read. Not on the loop's thread.
    private func readStored(_ device: String, store: any DeviceStateStore) -> Terminal?? {
        do {
            let record = try store.load(transform: key, device: device)
            let known = record.flatMap { $0.format == Self.format ? Self.terminal($0) : nil }
            state.withLock { s in
                if let known { remember(device, known, in: &s) } else { s.terminals[device] = nil }
            }
            return .some(known)
        } catch {
            logger.error("cannot read the registration of terminal \(device): \(error)")
            return nil
        }
    }

    /// Over UDP a terminal not known here may have registered at another gateway of the fleet:
    /// its record is read (once per device every few seconds, a bounded number at once) so that
    /// its next datagram is taken.
    private func readRecord(_ device: String) {
        guard let store else { return }
        let now = clock.now().milliseconds
        let start: Bool = state.withLock { s in
            if let last = s.reads[device], now - last < Self.rereadMilliseconds { return false }
            if s.reads.count >= Self.maxReads {
                s.reads = s.reads.filter { now - $0.value < Self.rereadMilliseconds }
                guard s.reads.count < Self.maxReads else { return false }
            }
            s.reads[device] = now
            return true
        }
        guard start else { return }
        DispatchQueue.global().async { [self] in _ = readStored(device, store: store) }
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
