/// A product was defined or redefined in an app's catalog (stream `catalog/<bundle id>`); the
/// latest definition of a product id wins from its position on, so a replay sees the catalog as
/// it was when each purchase was recorded.
public struct ProductDefined: LedgerEvent {
    public static let typeName = try! EventTypeName("ProductDefined", version: 1)

    public let product: Product

    public init(product: Product) {
        self.product = product
    }
}
