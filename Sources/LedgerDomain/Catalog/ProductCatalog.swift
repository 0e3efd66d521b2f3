/// An app's catalog as its events define it: the latest definition of each product wins.
public struct ProductCatalog: Hashable, Sendable {
    public private(set) var products: [String: Product] = [:]

    public init(products: [Product] = []) {
        for product in products { self.products[product.productId] = product }
    }

    public mutating func apply(_ event: ProductDefined) {
        products[event.product.productId] = event.product
    }

    /// The product's type, or `unknown` when the catalog does not know it (yet).
    public func type(of productId: String) -> ProductType {
        products[productId]?.type ?? .unknown
    }

    public subscript(productId: String) -> Product? {
        products[productId]
    }
}
