import Foundation
import HTTPTypes
import Hummingbird
import LedgerApplication
import LedgerDomain
import NIOCore
import ServiceLifecycle

extension LedgerAPI {
    /// How often a Server-Sent Events stream with nothing to say sends a comment, so that proxies
    /// and the client's own timeouts keep it open.
    static let changeStreamKeepAlive: Duration = .seconds(15)

    /// `GET /v1/apps/{bundleId}/changes?after=&limit=&wait=`: the app's changes after a position,
    /// in log order. `after` is a position, or the id of the last change handled. With `Accept:
    /// text/event-stream`, a stream of them that does not end, each change's id its event id, so
    /// that `Last-Event-ID` resumes it.
    func changes(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .read)
        guard let feed = services.changes else { throw APIError.notFound("this server keeps no change feed") }
        let limit = Int(try Self.integerQuery("limit", request, range: 1...Int64(FollowChanges.maximumLimit)) ?? 100)
        let streaming = request.headers[.accept]?.contains("text/event-stream") == true
        let resumed = streaming ? request.headers[HTTPField.Name("Last-Event-ID")!].map { $0.trimmingCharacters(in: .whitespaces) } : nil
        let given = request.uri.queryParameters.get("after").map { String($0) } ?? resumed
        guard let given else {
            throw APIError.invalidRequest("after is required: the position or change id of the last change handled (0 for the first page)", field: "after")
        }
        guard let after = ChangeCursor(parsing: given) else {
            throw APIError.invalidRequest("after must be a log position such as 1234 or a change id such as chg_1234_0 (got '\(given)')", field: "after")
        }
        if streaming {
            // A first read before the 200, so that a database that does not answer is a 503, not a cut stream.
            let first = try await feed.page(app: app, after: after, limit: limit)
            return Response(status: .ok, headers: Self.eventStreamHeaders, body: Self.eventStream(feed, app: app, first: first, limit: limit))
        }
        let wait = try Self.integerQuery("wait", request, range: 0...Int64(FollowChanges.maximumWait.components.seconds)) ?? 0
        var page = try await feed.page(app: app, after: after, limit: limit)
        // Held a second at a time, so that a shutdown answers it at once (empty) rather than wait.
        let deadline = ContinuousClock.now + .seconds(wait)
        while page.changes.isEmpty, ContinuousClock.now < deadline, !Task.isShuttingDownGracefully, !Task.isCancelled {
            page = try await feed.page(app: app, after: after, limit: limit, wait: min(deadline - .now, .seconds(1)))
        }
        return APIJSON.response(data: Self.json(page), status: .ok)
    }

    static let eventStreamHeaders: HTTPFields = [
        .contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-store", HTTPField.Name("X-Accel-Buffering")!: "no",
    ]

    /// `{"changes":[…],"more":…,"position":…}`, the stored changes spliced in as they are.
    static func json(_ page: ChangePage) -> Data {
        var text = "{\"changes\":["
        text.reserveCapacity(page.changes.reduce(64) { $0 + $1.body.utf8.count + 1 })
        for (index, change) in page.changes.enumerated() {
            if index > 0 { text += "," }
            text += change.body
        }
        text += "],\"more\":\(page.more),\"position\":\(page.position)}"
        return Data(text.utf8)
    }

    /// Every change as an SSE event `change` with the change's id as its event id. A comment when
    /// there is nothing to send for a while.
    static func eventStream(_ feed: FollowChanges, app: String, first: ChangePage, limit: Int) -> ResponseBody {
        ResponseBody { writer in
            var page = first
            var quiet = ContinuousClock.now
            // Ends when the server shuts down (the request runs inside its service), so that a
            // stream never holds a shutdown back; the follower resumes from its last event id.
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                if !page.changes.isEmpty {
                    var text = ""
                    for change in page.changes {
                        text += "event: change\nid: \(ChangeRecord.id(position: change.position, seq: change.seq))\ndata: \(change.body)\n\n"
                    }
                    try await writer.write(ByteBuffer(string: text))
                    quiet = .now
                } else if ContinuousClock.now - quiet >= changeStreamKeepAlive {
                    try await writer.write(ByteBuffer(string: ": position \(page.position)\n\n"))
                    quiet = .now
                }
                let wait: Duration = page.more ? .zero : .seconds(1)
                page = try await feed.page(app: app, after: ChangeCursor(position: page.position), limit: limit, wait: wait)
            }
            try await writer.finish(nil)
        }
    }
}
