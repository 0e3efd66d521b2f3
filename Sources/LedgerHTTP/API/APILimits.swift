/// Sizes the API accepts. Anything larger is refused with a 413 or a 400 naming the field.
public enum APILimits {
    /// A receipt body: base64 receipts of long-lived users run to a few hundred KiB.
    public static let receiptBodyBytes = 2 * 1024 * 1024
    /// `receiptData` itself.
    public static let receiptDataCharacters = 1_500_000
    /// A StoreKit 2 transaction or an App Store notification: a few kilobytes, its chain included.
    public static let signedPayloadCharacters = 64 * 1024
    public static let signedPayloadBodyBytes = 80 * 1024
    /// Every other request body.
    public static let commandBodyBytes = 64 * 1024
    /// Ids: bundle, user, device, product, transaction.
    public static let identifierCharacters = 255
    /// Page sizes.
    public static let defaultPageSize = 100
    public static let maximumPageSize = 1_000
}
