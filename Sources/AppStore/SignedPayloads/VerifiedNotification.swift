import Foundation
import LedgerApplication
import LedgerDomain

/// A notification whose signature, chain, app and environment were verified, as the ledger takes
/// it in: the fact to record and the document to keep (the JWS as posted, the fields it decoded
/// to). The webhook and the recovery from Apple's notification history make it the same way, so a
/// notification recovered is the same fact as the one delivered.
public struct VerifiedNotification: Sendable {
    public let notification: AppStoreNotificationReceived
    public let document: AppStoreDocument

    /// Nil environment: the payload names one the ledger does not record (Xcode, local testing).
    public init?(
        jws: String, app: String, verified: (notification: SignedNotification, transaction: SignedTransaction?, renewalInfo: SignedRenewalInfo?)
    ) throws {
        let signed = verified.notification
        guard let name = signed.payloadEnvironment, let environment = StoreEnvironment(responseValue: name) else { return nil }
        let decoded = signed.fields.merging(["notificationType": signed.notificationType, "notificationUUID": signed.notificationUUID,
                                             "subtype": signed.subtype ?? ""]) { $1 }
        let json = try LedgerJSON.encode(decoded)
        document = AppStoreDocument(
            app: app, receiptHash: AppStoreReceiptVerifier.sha256Hex(jws), receiptData: jws,
            answerHash: AppStoreReceiptVerifier.sha256Hex(json), environment: environment.rawValue, status: 0,
            answeredAt: signed.signedDate, answer: Data(json.utf8)
        )
        notification = AppStoreNotificationReceived(
            notificationUUID: signed.notificationUUID, notificationType: signed.notificationType, subtype: signed.subtype,
            environment: environment, signedDate: signed.signedDate, fields: signed.fields,
            transaction: verified.transaction?.fields, renewalInfo: verified.renewalInfo?.fields, payloadHash: document.receiptHash
        )
    }
}
