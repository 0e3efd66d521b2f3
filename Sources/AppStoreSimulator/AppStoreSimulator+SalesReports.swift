import AppStore
import Crypto
import Foundation
import Hummingbird
import HummingbirdCore
import LedgerDomain

/// The App Store Connect API's sales reports, as Apple serves them: `GET /v1/salesReports` with a
/// team key's token (ES256, audience `appstoreconnect-v1`, no bundle id), the vendor number and the
/// report's filters; the report gzip'd, or 404 when the day had no sales.
extension AppStoreSimulator {
    struct ConnectKeyView: Codable { var keyId: String; var issuerId: String; var privateKey: String; var vendorNumber: String }

    func addSalesReportRoutes(to router: Router<some RequestContext>) {
        let store = self.store
        // A team's App Store Connect API key (Users and Access > Integrations > App Store Connect
        // API), with the vendor number its reports are filed under.
        router.post("admin/connect-keys") { _, _ -> Response in
            let made = await store.createConnectKey()
            return try Self.json(ConnectKeyView(keyId: made.keyID, issuerId: made.issuerID, privateKey: made.privateKeyPEM,
                                                vendorNumber: SimulatorStore.vendorNumber), status: .created)
        }
        router.get("v1/salesReports") { request, _ -> Response in
            guard await Self.authenticateTeam(request, store: store) else {
                return try Self.connectError(.unauthorized, "NOT_AUTHORIZED", "Authentication credentials are missing or invalid.")
            }
            if let refusal = await store.takeConnectRefusal() {
                var headers = HTTPFields()
                headers[.retryAfter] = String(refusal)
                headers[.contentType] = "application/json"
                return Response(status: .tooManyRequests, headers: headers, body: .init(byteBuffer: ByteBuffer(string: """
                    {"errors":[{"status":"429","code":"RATE_LIMIT_EXCEEDED","title":"The request rate limit has been reached.","detail":"We've received too many requests for this API. Please wait and try again or slow down your request rate."}]}
                    """)))
            }
            // `filter[…]` as Apple writes it, or with its brackets percent-encoded as clients send them.
            let query = ConnectQuery(parameters: request.uri.queryParameters)
            let filters = ["filter[frequency]": "DAILY", "filter[reportSubType]": "SUMMARY", "filter[reportType]": "SALES"]
            for (name, value) in filters where query.get(name) != value {
                return try Self.connectError(.badRequest, "PARAMETER_ERROR.INVALID", "\(name) must be \(value) here (the simulator writes daily summary sales reports).")
            }
            guard query.get("filter[vendorNumber]") == SimulatorStore.vendorNumber else {
                return try Self.connectError(.badRequest, "PARAMETER_ERROR.INVALID", "You can't view reports for this vendor number.")
            }
            guard let day = query.get("filter[reportDate]") else {
                return try Self.connectError(.badRequest, "PARAMETER_ERROR.REQUIRED", "filter[reportDate] is required.")
            }
            if day > (await store.reportingToday) {
                return try Self.connectError(.notFound, "NOT_FOUND", "The report is not available yet.")
            }
            let text: String
            do {
                text = try await store.salesReport(day: day)
            } catch let error as SimulatorError {
                return try Self.connectError(.badRequest, "PARAMETER_ERROR.INVALID", error.message)
            }
            guard text.split(separator: "\n").count > 1 else {
                return try Self.connectError(.notFound, "NOT_FOUND", "There were no sales for the date specified.")
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/a-gzip"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Gzip.compress(Data(text.utf8)))))
        }
    }

    static func connectError(_ status: HTTPResponse.Status, _ code: String, _ detail: String) throws -> Response {
        try json(["errors": [["status": String(status.code), "code": code, "title": code, "detail": detail]]], status: status)
    }

    /// Whether the bearer token is signed by a team key of this simulator's, for App Store Connect
    /// (20 minutes at most, as Apple takes them).
    static func authenticateTeam(_ request: Request, store: SimulatorStore) async -> Bool {
        await verifiedClaims(request, longest: 1200) { keyID, _ in await store.connectKey(keyID) } != nil
    }
}

/// `filter[…]` as Apple writes it, or with its brackets percent-encoded as clients send them.
struct ConnectQuery {
    let parameters: FlatDictionary<Substring, Substring>

    func get(_ name: String) -> String? {
        if let value = parameters.get(name) { return value }
        let encoded = name.replacingOccurrences(of: "[", with: "%5B").replacingOccurrences(of: "]", with: "%5D")
        return parameters.get(encoded)
    }
}

extension SimulatorStore {
    func createConnectKey() -> (keyID: String, issuerID: String, privateKeyPEM: String) {
        let key = P256.Signing.PrivateKey()
        let keyID = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(10)).uppercased()
        let issuerID = UUID().uuidString.lowercased()
        connectKeys[keyID] = (issuerID, key.publicKey.x963Representation)
        return (keyID, issuerID, key.pemRepresentation)
    }

    /// Today in the reports' time zone (Pacific Time), by the simulator's clock: later days have no report yet.
    var reportingToday: String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "America/Los_Angeles")!
        let parts = calendar.dateComponents([.year, .month, .day], from: now)
        return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
    }

    func connectKey(_ keyID: String) -> (issuerID: String, publicKey: Data)? { connectKeys[keyID] }

    /// The next sales report call's 429, with its Retry-After in seconds, if one is owed.
    func takeConnectRefusal() -> Int? {
        guard faults.connectTooManyRequests > 0 else { return nil }
        faults.connectTooManyRequests -= 1
        return 1
    }

    /// The vendor's report of a day: every app's in-app purchases.
    func salesReport(day: String) throws -> String {
        var text = ""
        for bundleId in apps.keys.sorted() {
            let report = try salesReport(bundleId: bundleId, day: day)
            text += text.isEmpty ? report : report.split(separator: "\n", omittingEmptySubsequences: false).dropFirst().joined(separator: "\n")
        }
        return text.isEmpty ? Self.salesReportColumns.joined(separator: "\t") + "\n" : text
    }
}
