import Foundation

/// A fact the ledger records, with its stored, versioned type name and stable JSON.
///
/// The JSON of every event type is pinned by a golden-file test: changing a payload means a new
/// version (`PurchaseRecorded.v2`), never a silent change to what old events decode as.
public protocol LedgerEvent: Codable, Hashable, Sendable {
    static var typeName: EventTypeName { get }
}
