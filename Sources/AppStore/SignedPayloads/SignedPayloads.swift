import Foundation
import LedgerDomain

/// The fields of a signed payload as text, by Apple's key: strings as they are, numbers and
/// booleans as JSON wrote them (`990`, `true`), nested objects flattened under `outer.inner`, a
/// list of strings joined with commas (`eligibleWinBackOfferIds`), and any other list (Advanced
/// Commerce's `items`, objects in a list) kept whole as canonical JSON text. What the ledger
/// records is this, verbatim: `AppStoreFields` reads it.
///
/// Whatever Apple adds is kept, never refused: a shape this version does not know is recorded as
/// it came. The payload is bounded in size by the route; nesting deeper than `maximumDepth` is kept
/// as JSON text at that depth, so no shape can make the reading run away.
public struct SignedFields: Decodable, Sendable, Hashable {
    public let values: [String: String]

    /// Objects within objects flattened at most this deep; below, kept whole as JSON text.
    static let maximumDepth = 8

    public init(from decoder: any Decoder) throws {
        var values: [String: String] = [:]
        try Self.flatten(decoder.container(keyedBy: AnyKey.self), prefix: "", into: &values)
        self.values = values
    }

    /// Keys of `skip` (at the top level) are left out: they are read on their own.
    static func flatten(
        _ container: KeyedDecodingContainer<AnyKey>, prefix: String, skipping skip: Set<String> = [], depth: Int = 0,
        into values: inout [String: String]
    ) throws {
        for key in container.allKeys where !skip.contains(key.stringValue) {
            let name = prefix + key.stringValue
            let value = try container.decode(JSONValue.self, forKey: key)
            switch value {
            case .null:
                continue
            case .object where depth < maximumDepth:
                try flatten(container.nestedContainer(keyedBy: AnyKey.self, forKey: key), prefix: name + ".", depth: depth + 1, into: &values)
            case .array(let items) where items.allSatisfy({ if case .string(let text) = $0 { !text.contains(",") } else { false } }):
                values[name] = items.map { if case .string(let text) = $0 { text } else { "" } }.joined(separator: ",")
            default:
                values[name] = value.text
            }
        }
    }

    /// Any JSON value, for fields whose shape Apple may change: read without a schema, written
    /// back as canonical text (sorted keys, no spaces).
    enum JSONValue: Decodable, Hashable {
        case null, bool(Bool), integer(Int64), number(Double), string(String)
        indirect case array([JSONValue])
        indirect case object([String: JSONValue])

        init(from decoder: any Decoder) throws {
            if var list = try? decoder.unkeyedContainer() {
                var items: [JSONValue] = []
                while !list.isAtEnd { items.append(try list.decode(JSONValue.self)) }
                self = .array(items)
            } else if let object = try? decoder.container(keyedBy: AnyKey.self) {
                var members: [String: JSONValue] = [:]
                for key in object.allKeys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
                self = .object(members)
            } else {
                let single = try decoder.singleValueContainer()
                if single.decodeNil() { self = .null }
                else if let flag = try? single.decode(Bool.self) { self = .bool(flag) }
                else if let integer = try? single.decode(Int64.self) { self = .integer(integer) }
                else if let number = try? single.decode(Double.self) { self = .number(number) }
                else { self = .string(try single.decode(String.self)) }
            }
        }

        /// A scalar as the flattened fields write it (a string as it is); a list or an object as
        /// canonical JSON.
        var text: String {
            switch self {
            case .null: "null"
            case .bool(let flag): flag ? "true" : "false"
            case .integer(let integer): String(integer)
            case .number(let number): String(number)
            case .string(let text): text
            case .array, .object: json
            }
        }

        var json: String {
            switch self {
            case .string(let text):
                // Encoding a string cannot fail.
                (try? String(decoding: JSONEncoder().encode(text), as: UTF8.self)) ?? "\"\""
            case .array(let items): "[" + items.map(\.json).joined(separator: ",") + "]"
            case .object(let members):
                "{" + members.keys.sorted().map { key in JSONValue.string(key).json + ":" + members[key]!.json }.joined(separator: ",") + "}"
            default: text
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

    /// The app it is about, from whichever of Apple's mutually exclusive objects it carries
    /// (`data`, `summary`, `externalPurchaseToken`, `appData`).
    public var payloadBundleId: String? {
        fields["data.bundleId"] ?? fields["summary.bundleId"] ?? fields["externalPurchaseToken.bundleId"] ?? fields["appData.bundleId"]
    }

    /// The environment it is about. An external purchase token names none: Apple's sandbox tokens
    /// are those whose `externalPurchaseId` starts with `SANDBOX`, as Apple's own library reads them.
    public var payloadEnvironment: String? {
        if let named = fields["data.environment"] ?? fields["summary.environment"] ?? fields["appData.environment"] { return named }
        guard let token = fields["externalPurchaseToken.externalPurchaseId"] else { return nil }
        return token.hasPrefix("SANDBOX") ? StoreEnvironment.sandbox.responseValue : StoreEnvironment.production.responseValue
    }

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
