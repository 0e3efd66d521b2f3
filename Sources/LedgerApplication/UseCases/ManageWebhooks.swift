import Foundation
import LedgerDomain

/// What an operator (`ledger webhooks`) or an app's admin key (`/v1/apps/{bundleId}/webhooks`)
/// does with an app's webhook endpoints: add one (its secret shown once), list, remove, look at
/// its deliveries and their attempts, and send deliveries again.
///
/// `app` nil is the operator, who may name any endpoint; an app's key names only its app's.
public struct ManageWebhooks: Sendable {
    let store: any WebhookStore
    let directory: any AppDirectory

    /// The most types an endpoint may name, and the most deliveries one listing shows.
    public static let maximumTypes = 32
    public static let maximumLimit = 1_000

    public init(store: any WebhookStore, directory: any AppDirectory) {
        self.store = store
        self.directory = directory
    }

    /// Adds an endpoint of `app` at `url`, for `types` (nil: all), starting after `fromPosition`
    /// (nil: after the changes written so far; 0: the whole history).
    public func add(app: String, url: String, types: [String]? = nil, fromPosition: Int64? = nil) async throws -> CreatedWebhookEndpoint {
        try WebhookURL.validate(url)
        let types = try Self.validate(types: types)
        if let fromPosition, fromPosition < 0 {
            throw WebhookError.invalidInput("the starting position is 0 (the whole history) or a log position, not \(fromPosition)")
        }
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        let secret = WebhookSecret.generate()
        let endpoint = try await store.addEndpoint(app: app, url: url, types: types, fromPosition: fromPosition, secret: secret)
        return CreatedWebhookEndpoint(endpoint: endpoint, secret: secret)
    }

    /// The app's endpoints that are not removed.
    public func list(app: String) async throws -> [WebhookEndpoint] {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        return try await store.endpoints(app: app)
    }

    /// Removes the endpoint: nothing more is sent to it. Removing it again changes nothing.
    @discardableResult
    public func remove(id: String, app: String? = nil) async throws -> WebhookEndpoint {
        _ = try await endpoint(id, app: app, active: false)
        guard let removed = try await store.removeEndpoint(id: id) else { throw WebhookError.unknownEndpoint(id, app: app) }
        return removed
    }

    /// The app's latest deliveries (of one endpoint, or all), newest last, with their attempts.
    public func deliveries(app: String, endpointID: String? = nil, failedOnly: Bool = false, limit: Int = 50) async throws -> [WebhookDeliveryRecord] {
        guard (1...Self.maximumLimit).contains(limit) else {
            throw WebhookError.invalidInput("the limit is 1 to \(Self.maximumLimit), not \(limit)")
        }
        if let endpointID {
            _ = try await endpoint(endpointID, app: app, active: false)
        } else {
            guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        }
        return try await store.deliveries(app: app, endpointID: endpointID, failedOnly: failedOnly, limit: limit)
    }

    /// Sends the change `changeID` (`chg_<position>_<seq>`) to the endpoint again, now, whether it
    /// was parked, delivered or still pending.
    public func resend(endpointID: String, changeID: String, app: String? = nil) async throws {
        guard let change = WebhookChangeID(changeID) else {
            throw WebhookError.invalidInput("a change id is chg_<position>_<seq> (as the webhook-id header has it), not '\(changeID.prefix(100))'")
        }
        _ = try await endpoint(endpointID, app: app, active: true)
        guard try await store.resend(endpointID: endpointID, change: change) else {
            throw WebhookError.unknownChange(change.description, endpoint: endpointID)
        }
    }

    /// Sends every change after `position` to the endpoint again, now (those of its types it never
    /// queued too); returns how many.
    public func resend(endpointID: String, after position: Int64, app: String? = nil) async throws -> Int {
        guard position >= 0 else { throw WebhookError.invalidInput("the position is 0 or more, not \(position)") }
        _ = try await endpoint(endpointID, app: app, active: true)
        return try await store.resend(endpointID: endpointID, after: position)
    }

    /// The endpoint, when it is `app`'s (any app's for the operator) and, with `active`, not removed.
    private func endpoint(_ id: String, app: String?, active: Bool) async throws -> WebhookEndpoint {
        guard Self.isEndpointID(id), let endpoint = try await store.endpoint(id: id), app == nil || endpoint.app == app,
              !active || endpoint.removedAt == nil
        else { throw WebhookError.unknownEndpoint(id, app: app) }
        return endpoint
    }

    /// `wh_` and 16 lower-case hex digits.
    static func isEndpointID(_ id: String) -> Bool {
        id.hasPrefix("wh_") && id.utf8.count == 19 && id.utf8.dropFirst(3).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The types as stored: nil (all) or a sorted, de-duplicated list of change types.
    static func validate(types: [String]?) throws(WebhookError) -> [String]? {
        guard let types else { return nil }
        let unique = Set(types.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }).sorted()
        guard !unique.isEmpty else { throw .invalidInput("name at least one change type, or none for all of them") }
        guard unique.count <= maximumTypes else { throw .invalidInput("at most \(maximumTypes) types, not \(unique.count)") }
        // A change is sent when its own type (the first thing that happened) is one of these.
        for type in unique where StandingChange.Kind(rawValue: type) == nil {
            let known = StandingChange.Kind.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidInput("'\(type.prefix(64))' is not a change type; the types are \(known)")
        }
        return unique
    }
}
