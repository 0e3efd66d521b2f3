import ArgumentParser
import Foundation
import LedgerDomain
import LedgerStore
import Logging

struct Log: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read the event log.",
        subcommands: [Tail.self]
    )

    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print events as JSON lines, in position order.",
            discussion: """
                Each line: position, streamId, streamVersion, eventId, type, recordedAt, deduplicationKey, data, metadata.
                Without --follow it prints what is committed and stops; with --follow it keeps going until
                interrupted, never skipping an event that commits late.
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: "First position to print (default: 1, the start of the log).")
        var from: Int64 = 1

        @Option(help: "Only this stream, e.g. user/com.example.app/42.")
        var stream: String?

        @Flag(help: "Keep printing new events as they are committed.")
        var follow = false

        func run() async throws {
            let logger = try options.makeLogger()
            guard from >= 1 else { throw ValidationError("--from must be a position of 1 or more") }
            var stream: StreamID?
            if let name = self.stream {
                do {
                    stream = try StreamID(name)
                } catch {
                    throw ValidationError(error.message)
                }
            }
            let settings = try await options.databaseSettings(logger: logger)
            let start = from - 1
            let only = stream
            try await LedgerDatabase.withClient(settings, logger: logger) { client in
                let store = PostgresEventStore(client: client, logger: logger)
                if follow {
                    let follower = LogFollower(
                        store: store, listenConfiguration: settings.connectionConfiguration, logger: logger
                    )
                    try await follower.follow(after: start, stream: only) { events in
                        Self.print(events)
                    }
                } else {
                    var position = start
                    while true {
                        let events = try await store.readAll(after: position, stream: only, limit: 1_000)
                        guard let last = events.last else { break }
                        Self.print(events)
                        position = last.position
                    }
                }
            }
        }

        static func print(_ events: [RecordedEvent]) {
            Output.line(events.map(\.jsonLine).joined(separator: "\n"))
        }
    }
}

extension RecordedEvent {
    /// One JSON object per line; `data` and `metadata` are embedded as the JSON they are.
    var jsonLine: String {
        struct Fields: Encodable {
            let position: Int64
            let streamId: String
            let streamVersion: Int64
            let eventId: String
            let type: String
            let recordedAt: String
            let deduplicationKey: String?
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let fields = Fields(
            position: position, streamId: streamID, streamVersion: streamVersion,
            eventId: eventID.uuidString.lowercased(), type: type,
            recordedAt: recordedAt.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted)),
            deduplicationKey: deduplicationKey
        )
        let head = (try? encoder.encode(fields)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return String(head.dropLast()) + #","data":"# + data + #","metadata":"# + metadata + "}"
    }
}
