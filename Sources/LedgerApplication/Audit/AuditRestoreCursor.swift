import Foundation
import LedgerDomain

/// Where a page of restores ended: an opaque, URL-safe token carrying the app and the last row's key.
public struct AuditRestoreCursor: Sendable, Hashable {
    public let app: String
    public let position: Int64
    public let deviceId: String
    public let transactionId: String

    private struct Payload: Codable {
        let v: Int
        let a: String
        let p: Int64
        let d: String
        let t: String
    }

    public init(app: String, position: Int64, deviceId: String, transactionId: String) {
        self.app = app
        self.position = position
        self.deviceId = deviceId
        self.transactionId = transactionId
    }

    /// The cursor a previous page returned, checked against the app being read.
    public init(parsing text: String, app: String) throws(AuditQueryError) {
        guard let payload = AuditCursor.payload(text, as: Payload.self), payload.v == 1, payload.p >= 0 else {
            throw .invalidCursor("the cursor is not one this ledger issued for restores")
        }
        guard payload.a == app else { throw .invalidCursor("the cursor was issued for a different app") }
        self.init(app: app, position: payload.p, deviceId: payload.d, transactionId: payload.t)
    }

    public var text: String { AuditCursor.token(Payload(v: 1, a: app, p: position, d: deviceId, t: transactionId)) }
}
