import Foundation

extension NewEvent {
    /// A new event from a typed payload, in the ledger's stored JSON.
    public init<Event: LedgerEvent>(
        _ event: Event,
        eventID: UUID = UUID(),
        metadata: [String: String] = [:],
        deduplicationKey: DeduplicationKey? = nil
    ) throws {
        try self.init(
            encodedData: LedgerJSON.encode(event), metadata: LedgerJSON.encode(metadata),
            eventID: eventID, type: Event.typeName, deduplicationKey: deduplicationKey
        )
    }
}
