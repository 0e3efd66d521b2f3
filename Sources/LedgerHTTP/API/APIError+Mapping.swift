import AppStore
import Hummingbird
import LedgerApplication
import LedgerDomain
import NIOHTTP1

/// The one place where what went wrong becomes an HTTP status and an error code: the domain's
/// refusals, the command layer's, the projections', the audit queries', the App Store's and the
/// HTTP layer's own. A new error type is mapped here and nowhere else.
extension APIError {
    /// The API's answer to `error`; nil for an error nobody expected (a 500 that names only the
    /// request id, logged by `ErrorMiddleware`).
    init?(mapping error: any Error) {
        switch error {
        case let error as APIError:
            self = error
        case let error as DecisionError:
            self = Self.decision(error)
        case let error as CommandError where error.code == .commandKeyReused:
            self = .unprocessable(error.code.rawValue, error.message)
        case let error as CommandError:
            self = .conflict(error.code.rawValue, error.message, position: error.position)
        case let error as LedgerInputError:
            // Input the domain refuses is the caller's to fix, whichever route met it.
            self = .invalidRequest(error.message)
        case let error as ReadError where error.code == .unknownUser:
            self = APIError(.notFound, error.code.rawValue, error.message)
        case let error as ReadError:
            self = .unavailable(error.code.rawValue, error.message, position: error.position)
        case let error as NotificationIntakeError where error.code == .unknownApp:
            self = .notFound(error.message)
        case let error as NotificationIntakeError:
            self = APIError.unprocessable(error.code.rawValue, error.message).field("signedPayload")
        case let error as BackfillError:
            self = .unavailable("appstore_unavailable", error.message)
        case let error as AppStoreQueryError:
            self = Self.appStoreQuery(error)
        case let error as AuditQueryError:
            self = Self.audit(error)
        case let error as ReceiptVerificationError:
            self = Self.appStore(error)
        case let error as AccessError:
            self = Self.access(error)
        case let error as PeriodError:
            self = error.code == .periodNeverClosed ? APIError(.notFound, error.code.rawValue, error.message)
                : .conflict(error.code.rawValue, error.message)
        case let error as WebhookError:
            self = Self.webhook(error)
        case let error as SecretError:
            // A key the operator must fix; the log has which (LedgerAPI.verify).
            self = APIError(.internalServerError, error.code.rawValue,
                            "the ledger cannot use this app's App Store shared secret until its operator fixes the secret key (the ledger's log says how); nothing was recorded")
        case let error as StoreError where error.code == .databaseUnavailable:
            // The store's own word for an outage; other errors that show one are told apart by
            // `DatabaseGateMiddleware` (it asks the services' `DatabaseAvailability`).
            self = .databaseUnavailable(since: nil)
        case is StoreError:
            // The database failed or refused: not the caller's to fix. A 500 naming only the
            // request id; the log has the store's message.
            return nil
        case let error as HTTPError:
            self = Self.http(error)
        case let error as HTTPParserError:
            // The client broke off its request (a body cut short by it or by a timeout) or sent
            // something that is not HTTP: the caller's, not a failure of the ledger.
            self = APIError(.badRequest, "invalid_http", "the request could not be read (\(error.debugDescription)); nothing was recorded")
        case let error as any HTTPResponseError:
            self = APIError(error.status, "http_\(error.status.code)", error.status.reasonPhrase)
        case is CancellationError:
            self = .unavailable("shutting_down", "the ledger is shutting down; retry")
        default:
            return nil
        }
    }

    /// Refusals of the user's stream.
    private static func decision(_ error: DecisionError) -> APIError {
        switch error.code {
        case .insufficientBalance:
            var apiError = APIError.conflict(error.code.rawValue, error.message)
            apiError.balance = error.balance
            return apiError
        case .alreadyRevoked, .tokenBoundToAnotherUser: return .conflict(error.code.rawValue, error.message)
        case .unknownTransaction, .unknownProduct: return APIError(.notFound, error.code.rawValue, error.message)
        case .notConsumable: return .unprocessable(error.code.rawValue, error.message)
        case .invalidQuantity: return .invalidRequest(error.message, field: "quantity")
        case .invalidInput: return .invalidRequest(error.message)
        }
    }

    /// A bad cursor, filter or page size is the caller's (400, naming the field); a trail still
    /// being built is a 503 to retry.
    private static func audit(_ error: AuditQueryError) -> APIError {
        switch error.code {
        case .invalidCursor:
            var apiError = APIError(.badRequest, "invalid_cursor", error.message)
            apiError.field = "cursor"
            return apiError
        case .invalidFilter, .invalidLimit: return .invalidRequest(error.message, field: error.field)
        case .notReady: return .unavailable("projections_behind", error.message)
        }
    }

    /// The App Store's refusals are 422 with its status; its absence, or an answer that cannot be
    /// read, is a 503 to retry. Nothing was recorded either way.
    private static func appStore(_ error: ReceiptVerificationError) -> APIError {
        switch error.code {
        case .invalidReceipt:
            var apiError = APIError.unprocessable("invalid_receipt", error.message)
            apiError.appStoreStatus = error.status?.code
            return apiError
        case .unavailable:
            return .unavailable("appstore_unavailable", error.message)
        default:
            return .unavailable(
                "appstore_bad_response", "the App Store's answer could not be read (\(error.message)); nothing was recorded, retry later"
            )
        }
    }

    /// Questions to the App Store Server API: the caller's input (400), an order Apple does not
    /// know (404), an app the ledger cannot ask about (409, until its key is added), Apple's
    /// refusal (502) or absence (503, to retry).
    private static func appStoreQuery(_ error: AppStoreQueryError) -> APIError {
        switch error.code {
        case .invalidInput: .invalidRequest(error.message)
        case .orderNotFound: APIError(.notFound, error.code.rawValue, error.message)
        case .noServerAPIKey, .notConfigured: .conflict(error.code.rawValue, error.message)
        case .appStoreRefused: APIError(.badGateway, error.code.rawValue, error.message)
        case .appStoreRateLimited, .appStoreUnavailable: .unavailable(error.code.rawValue, error.message)
        }
    }

    /// The registry's refusals (an app or key that is not there, a bad name).
    private static func access(_ error: AccessError) -> APIError {
        switch error.code {
        case .unknownApp, .unknownKey: .notFound(error.message)
        case .invalidInput: .invalidRequest(error.message)
        }
    }

    /// Webhook administration: the caller's input (400, a URL naming why), an endpoint or change
    /// that is not there (404).
    private static func webhook(_ error: WebhookError) -> APIError {
        switch error.code {
        case .invalidURL: .invalidRequest(error.message, field: "url")
        case .invalidInput: .invalidRequest(error.message)
        case .unknownEndpoint, .unknownChange: APIError(.notFound, error.code.rawValue, error.message)
        }
    }

    /// Hummingbird's own: unknown routes, wrong methods, bodies over the limit.
    private static func http(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound: .notFound("there is no such route; /openapi.json lists them")
        case .contentTooLarge: .bodyTooLarge(limit: APILimits.receiptBodyBytes)
        default: APIError(error.status, "http_\(error.status.code)", error.body ?? error.status.reasonPhrase)
        }
    }
}
