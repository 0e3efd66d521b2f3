/// Folding stored events: the one place a stream's recorded events become state.
extension UserLedger {
    /// A user's stream folded from its recorded events, in version order, its transactions judged
    /// once at the end with `catalog` (the app's catalog, with its history).
    public init(folding events: some Sequence<RecordedEvent>, catalog: ProductCatalog) throws {
        self.init()
        for event in events { try gather(event) }
        classify(by: catalog)
    }

    /// Folds one recorded event without judging (see `gather(_:version:context:)`).
    public mutating func gather(_ event: RecordedEvent) throws {
        try gather(UserEvent(type: event.type, data: event.data), version: event.streamVersion,
                   context: Context(position: event.position, recordedAt: event.recordedAt))
    }
}

extension ProductCatalog {
    /// An app's catalog folded from its stream's recorded events. The stream holds product
    /// definitions only: anything else is an error, never skipped.
    public init(folding events: some Sequence<RecordedEvent>) throws {
        self.init()
        for event in events { try apply(event) }
    }

    /// Folds one recorded event of the catalog's stream: a product definition, or an error.
    public mutating func apply(_ event: RecordedEvent) throws {
        guard event.type == ProductDefined.typeName.stored else { throw UnknownEventType(type: event.type) }
        apply(try LedgerJSON.decode(ProductDefined.self, from: event.data), position: event.position)
    }
}
