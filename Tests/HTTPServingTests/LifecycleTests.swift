@testable import HTTPServing
import Testing

/// The two state machines on their own: who suspends, who resumes, and how often.
@Suite struct LifecycleTests {
    let reply = HTTPResponse(status: 200)

    @Test func anAnswerGivenWhileTheHandlerRunsIsQueuedWhenItReturns() {
        var l = RequestLifecycle()
        l.handlerStarts()
        let first = l.answered(reply), second = l.answered(HTTPResponse(status: 201))
        #expect(first == .kept)
        #expect(second == .ignored)
        guard case .queue(let r) = l.handlerReturned(stopping: false) else { Issue.record("not queued"); return }
        #expect(r.status == 200)
        #expect(l.phase == .answered)
    }

    @Test func anUnansweredRequestIsSuspendedAndResumedOnceByItsAnswer() {
        var l = RequestLifecycle()
        l.handlerStarts()
        guard case .suspend = l.handlerReturned(stopping: false) else { Issue.record("not suspended"); return }
        #expect(!l.hasAnswer)
        let first = l.answered(reply), second = l.answered(reply)
        #expect(first == .resume)
        #expect(second == .ignored, "one resume per suspension")
        let stopResumes = l.serverStopping()
        #expect(!stopResumes, "already resuming")
        let queued = l.resumed()
        #expect(queued?.status == 200)
        #expect(l.hasAnswer)
        let late = l.answered(reply)
        #expect(late == .ignored)
    }

    @Test func aStoppingServerResumesASuspendedRequestAndStillSendsAnAnswerThatComesFirst() {
        var l = RequestLifecycle()
        l.handlerStarts()
        _ = l.handlerReturned(stopping: false)
        let stopResumes = l.serverStopping()
        let answer = l.answered(reply)
        let queued = l.resumed()
        #expect(stopResumes)
        #expect(answer == .kept)
        #expect(queued?.status == 200)

        var unanswered = RequestLifecycle()
        unanswered.handlerStarts()
        _ = unanswered.handlerReturned(stopping: false)
        let resumes = unanswered.serverStopping()
        let nothing = unanswered.resumed()
        #expect(resumes)
        #expect(nothing == nil, "the server answers 503")
    }

    @Test func nothingIsSuspendedOnceTheServerStops() {
        var l = RequestLifecycle()
        l.handlerStarts()
        guard case .refuse = l.handlerReturned(stopping: true) else { Issue.record("suspended while stopping"); return }
        #expect(l.hasAnswer)
    }

    @Test func aClosedRequestIgnoresAnswersAndGivesBackOneNeverSent() {
        var l = RequestLifecycle()
        l.handlerStarts()
        _ = l.handlerReturned(stopping: false)
        let answer = l.answered(reply)
        let unsent = l.closed()
        let late = l.answered(reply)
        #expect(answer == .resume)
        #expect(unsent?.status == 200, "resumed, but closed before it was queued")
        #expect(late == .ignored)
    }

    @Test func aWakeDuringTheAskIsRememberedAndAWakeDuringTheSuspensionResumesOnce() {
        var s = StreamLifecycle()
        s.asking()
        let wakeWhileAsked = s.wake()
        let afterWake = s.bodySaidLater(stopping: false)
        #expect(!wakeWhileAsked, "running: nothing to resume")
        #expect(afterWake == .askAgain)
        s.asking()
        let quiet = s.bodySaidLater(stopping: false)
        let first = s.wake(), second = s.wake()
        #expect(quiet == .suspend)
        #expect(first)
        #expect(!second, "one resume per suspension")
        s.finish()
        let afterFinish = s.wake()
        #expect(!afterFinish)
    }

    @Test func aStreamWhoseClientLeftAbortsAndOneThatStopsEnds() {
        var stopping = StreamLifecycle()
        let ends = stopping.bodySaidLater(stopping: true)
        #expect(ends == .end)
        var gone = StreamLifecycle()
        gone.asking()
        let suspends = gone.bodySaidLater(stopping: false)
        let resumes = gone.clientLeft()
        let aborts = gone.bodySaidLater(stopping: false)
        #expect(suspends == .suspend)
        #expect(resumes)
        #expect(aborts == .abort)
    }
}
