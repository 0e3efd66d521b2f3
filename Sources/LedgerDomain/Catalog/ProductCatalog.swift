/// An app's catalog as its events define it.
///
/// The latest definition of each product answers questions about now; every definition is kept
/// with where it was recorded, so that a fact is classified and measured with the catalog as it
/// stood when the fact was recorded (`product(_:asOf:)`): a later edit changes no past period or price.
public struct ProductCatalog: Hashable, Sendable {
    /// One definition of a product and where in the log it was recorded.
    public struct Definition: Hashable, Sendable {
        public let position: Int64
        public let product: Product
    }

    public private(set) var products: [String: Product] = [:]
    /// Every definition of each product, in log order.
    public private(set) var history: [String: [Definition]] = [:]

    public init(products: [Product] = []) {
        for product in products { apply(ProductDefined(product: product)) }
    }

    /// Folds one definition; `position` is where the log recorded it (0 when not yet recorded).
    public mutating func apply(_ event: ProductDefined, position: Int64 = 0) {
        products[event.product.productId] = event.product
        history[event.product.productId, default: []].append(Definition(position: position, product: event.product))
    }

    /// The product's type, or `unknown` when the catalog does not know it (yet).
    public func type(of productId: String) -> ProductType {
        products[productId]?.type ?? .unknown
    }

    public subscript(productId: String) -> Product? {
        products[productId]
    }

    /// The product as the catalog defined it when log `position` was recorded. A fact not yet
    /// recorded (position 0) sees the latest definition; a fact recorded before the product was
    /// defined sees its first definition, so that it is classified once the catalog knows it.
    public func product(_ productId: String, asOf position: Int64) -> Product? {
        guard let definitions = history[productId], let first = definitions.first else { return nil }
        guard position > 0 else { return definitions.last?.product }
        return definitions.last { $0.position <= position }?.product ?? first.product
    }
}
