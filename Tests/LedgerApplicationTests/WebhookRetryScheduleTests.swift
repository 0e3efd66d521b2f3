import LedgerApplication
import Testing

@Suite("When failed webhook deliveries are tried again")
struct WebhookRetryScheduleTests {
    @Test("the standard schedule tries for more than a day, then parks")
    func standard() {
        let schedule = WebhookRetrySchedule.standard
        #expect(schedule.total > .seconds(24 * 3_600))
        #expect(schedule.delay(afterFailure: schedule.delays.count + 1) == nil)
        for (index, base) in schedule.delays.enumerated() {
            let delay = schedule.delay(afterFailure: index + 1)
            #expect(delay.map { $0 >= base && $0 <= base * 1.1 } == true, "after failure \(index + 1): \(String(describing: delay))")
        }
    }

    @Test("without jitter the waits are exactly the schedule's")
    func exact() {
        let schedule = WebhookRetrySchedule(delays: [.milliseconds(10), .milliseconds(20)], jitter: 0)
        #expect(schedule.delay(afterFailure: 1) == .milliseconds(10))
        #expect(schedule.delay(afterFailure: 2) == .milliseconds(20))
        #expect(schedule.delay(afterFailure: 3) == nil)
    }
}
