import Foundation
import LedgerDomain

/// The fields of a signed payload as text, by Apple's key: strings as they are, numbers and
/// booleans as JSON wrote them (`990`, `true`), nested objects flattened under `outer.inner`.
/// What the ledger records is this, verbatim: `AppStoreFields` reads it.
public struct SignedFields: Decodable, Sendable, Hashable {
    public let values: [String: String]

    public init(from decoder: any Decoder) throws {
        var values: [String: String] = [:]
        try Self.flatten(decoder.container(keyedBy: AnyKey.self), prefix: "", into: &values)
        self.values = values
    }

    /// Keys of `skip` (at the top level) are left out: they are read on their own.
    static func flatten(
        _ container: KeyedDecodingContainer<AnyKey>, prefix: String, skipping skip: Set<String> = [], into values: inout [String: String]
    ) throws {
        for key in container.allKeys where !skip.contains(key.stringValue) {
            let name = prefix + key.stringValue
            if try container.decodeNil(forKey: key) { continue }
            if let text = try? container.decode(String.self, forKey: key) {
                values[name] = text
            } else if let flag = try? container.decode(Bool.self, forKey: key) {
                values[name] = flag ? "true" : "false"
            } else if let integer = try? container.decode(Int64.self, forKey: key) {
                values[name] = String(integer)
            } else if let number = try? container.decode(Double.self, forKey: key) {
                values[name] = String(number)
            } else if let nested = try? container.nestedContainer(keyedBy: AnyKey.self, forKey: key) {
                try flatten(nested, prefix: name + ".", into: &values)
            } else if var list = try? container.nestedUnkeyedContainer(forKey: key) {
                var items: [String] = []
                while !list.isAtEnd { items.append((try? list.decode(String.self)) ?? "") }
                values[name] = items.joined(separator: ",")
            }
        }
    }

    struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// A StoreKit 2 transaction (`JWSTransactionDecodedPayload`), as a device's
/// `Transaction.jwsRepresentation` or a notification's `signedTransactionInfo` carries it.
public struct SignedTransaction: AppStoreSignedPayload, Hashable {
    public let fields: [String: String]
    public let signedDate: Date

    public var payloadBundleId: String? { fields["bundleId"] }
    public var payloadEnvironment: String? { fields["environment"] }

    public init(from decoder: any Decoder) throws {
        fields = try SignedFields(from: decoder).values
        signedDate = try Self.signedDate(fields, decoder: decoder)
        guard let id = fields["transactionId"], !id.isEmpty else {
            throw DecodingError.keyNotFound(SignedFields.AnyKey(stringValue: "transactionId"), .init(codingPath: [], debugDescription: "missing"))
        }
    }

    static func signedDate(_ fields: [String: String], decoder: any Decoder) throws -> Date {
        guard let text = fields["signedDate"], let milliseconds = Int64(text), let date = Date(recordableMilliseconds: milliseconds) else {
            throw DecodingError.keyNotFound(SignedFields.AnyKey(stringValue: "signedDate"),
                                            .init(codingPath: [], debugDescription: "signedDate (milliseconds since 1970) is missing or unreadable"))
        }
        return date
    }
}

/// Subscription renewal information (`JWSRenewalInfoDecodedPayload`): it names no bundle id, so
/// it is checked inside the notification that carries it, which does.
public struct SignedRenewalInfo: AppStoreSignedPayload, Hashable {
    public let fields: [String: String]
    public let signedDate: Date

    public var payloadBundleId: String? { nil }
    public var payloadEnvironment: String? { fields["environment"] }

    public init(from decoder: any Decoder) throws {
        fields = try SignedFields(from: decoder).values
        signedDate = try SignedTransaction.signedDate(fields, decoder: decoder)
    }
}

/// An App Store Server Notification, version 2 (`responseBodyV2DecodedPayload`), before its
/// signed transaction and renewal info are verified in turn.
public struct SignedNotification: AppStoreSignedPayload, Hashable {
    public let notificationType: String
    public let subtype: String?
    public let notificationUUID: String
    public let signedDate: Date
    /// Every other field, flattened (`version`, `data.appAppleId`, `data.status`, `summary.…`).
    public let fields: [String: String]
    public let signedTransactionInfo: String?
    public let signedRenewalInfo: String?

    public var payloadBundleId: String? { fields["data.bundleId"] ?? fields["summary.bundleId"] ?? fields["externalPurchaseToken.bundleId"] }
    public var payloadEnvironment: String? { fields["data.environment"] ?? fields["summary.environment"] }

    enum Keys: String, CodingKey { case notificationType, subtype, notificationUUID, signedDate, data }
    enum DataKeys: String, CodingKey { case signedTransactionInfo, signedRenewalInfo }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        notificationType = try container.decode(String.self, forKey: .notificationType)
        subtype = try container.decodeIfPresent(String.self, forKey: .subtype)
        notificationUUID = try container.decode(String.self, forKey: .notificationUUID)
        var fields: [String: String] = [:]
        try SignedFields.flatten(decoder.container(keyedBy: SignedFields.AnyKey.self), prefix: "",
                                 skipping: ["notificationType", "subtype", "notificationUUID", "data"], into: &fields)
        if container.contains(.data), !(try container.decodeNil(forKey: .data)) {
            let data = try container.nestedContainer(keyedBy: SignedFields.AnyKey.self, forKey: .data)
            try SignedFields.flatten(data, prefix: "data.", skipping: ["signedTransactionInfo", "signedRenewalInfo"], into: &fields)
            let signed = try container.nestedContainer(keyedBy: DataKeys.self, forKey: .data)
            signedTransactionInfo = try signed.decodeIfPresent(String.self, forKey: .signedTransactionInfo)
            signedRenewalInfo = try signed.decodeIfPresent(String.self, forKey: .signedRenewalInfo)
        } else {
            signedTransactionInfo = nil
            signedRenewalInfo = nil
        }
        signedDate = try SignedTransaction.signedDate(fields, decoder: decoder)
        fields["signedDate"] = nil
        self.fields = fields
    }
}

extension SignedPayloadVerifier {
    /// A notification with its transaction and renewal info, each verified: the notification for
    /// the app and, when given, the environment; what it carries for the same app and environment.
    public func verifyNotification(
        _ signedPayload: String, bundleId: String, environment: StoreEnvironment? = nil
    ) async throws(SignedPayloadError) -> (notification: SignedNotification, transaction: SignedTransaction?, renewalInfo: SignedRenewalInfo?) {
        let notification = try await verify(signedPayload, as: SignedNotification.self, bundleId: bundleId, environment: environment)
        let environment = environment ?? notification.payloadEnvironment.flatMap(StoreEnvironment.init(responseValue:))
        var transaction: SignedTransaction?
        if let jws = notification.signedTransactionInfo {
            transaction = try await verify(jws, as: SignedTransaction.self, bundleId: bundleId, environment: environment)
        }
        var renewalInfo: SignedRenewalInfo?
        if let jws = notification.signedRenewalInfo {
            renewalInfo = try await verify(jws, as: SignedRenewalInfo.self, bundleId: nil, environment: environment)
        }
        return (notification, transaction, renewalInfo)
    }
}
