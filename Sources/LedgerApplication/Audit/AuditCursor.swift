import Foundation
import LedgerDomain
import LedgerProjections

/// Where a page of the audit trail ended: an opaque, URL-safe token for the next page.
///
/// It carries the app it was issued for and the last row's key (position, event); the next page
/// starts strictly after that key, so rows are never skipped or repeated however many arrive
/// between pages.
public struct AuditCursor: Sendable, Hashable, CustomStringConvertible {
    public let app: String
    public let position: Int64
    public let event: AuditEventKind

    public init(app: String, position: Int64, event: AuditEventKind) {
        self.app = app
        self.position = position
        self.event = event
    }

    /// The cursor a previous page returned, checked against the app being read.
    public init(parsing text: String, app: String) throws(AuditQueryError) {
        guard let payload = Self.payload(text, as: Payload.self), payload.v == 1, payload.p >= 0 else {
            throw .invalidCursor("the cursor is not one this ledger issued")
        }
        guard payload.a == app else {
            throw .invalidCursor("the cursor was issued for a different app")
        }
        self.init(app: app, position: payload.p, event: payload.e)
    }

    /// The token: base64url (no padding) of a small JSON object.
    public var text: String { Self.token(Payload(v: 1, a: app, p: position, e: event)) }

    /// A cursor's token: base64url (no padding) of its payload as JSON with sorted keys.
    public static func token(_ payload: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding a struct of strings and integers cannot fail.
        return Base64URL.encode((try? encoder.encode(payload)) ?? Data())
    }

    /// The payload of a token `token` made, or nil when the text is not one.
    public static func payload<Payload: Decodable>(_ text: String, as type: Payload.Type) -> Payload? {
        guard text.utf8.count <= 2_048, let data = Base64URL.decode(text) else { return nil }
        return try? JSONDecoder().decode(type, from: data)
    }

    public var description: String { text }

    private struct Payload: Codable {
        let v: Int
        let a: String
        let p: Int64
        let e: AuditEventKind
    }
}
