import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerDomain
import NIOCore
import NIOHTTP1

/// The App Store Connect API's sales reports (`GET /v1/salesReports`): an app's vendor's Summary
/// Sales Report of one day, downloaded with the team's App Store Connect API key and parsed by
/// `SalesReportParser`, for `FetchSalesReports`.
///
/// Each call has one deadline (`timeout`) that covers connecting, Apple's answer and the whole
/// body. A 429 is honoured: the call waits Apple's `Retry-After` (at most `longestWait`) and asks
/// once more, else says when to try again. Redirects are not followed (the token would go along).
/// A 404 saying the day had no sales is a report with no lines; Apple publishes a day's report the
/// next morning in the reports' time zone, and a day not published yet is said so.
public struct AppStoreConnectReports: SalesReportSource {
    public struct Configuration: Sendable {
        public var baseURL: String
        public var timeout: Duration
        public var longestWait: Duration

        public init(baseURL: String = AppStoreConnectReports.appleURL, timeout: Duration = .seconds(60), longestWait: Duration = .seconds(60)) {
            self.baseURL = baseURL
            self.timeout = timeout
            self.longestWait = longestWait
        }

        /// `LEDGER_APPSTORE_CONNECT_URL` (the simulator's: `http://127.0.0.1:8090`), else Apple's.
        public static func fromEnvironment(_ variables: [String: String] = ProcessInfo.processInfo.environment) -> Self {
            Configuration(baseURL: variables["LEDGER_APPSTORE_CONNECT_URL"] ?? AppStoreConnectReports.appleURL)
        }
    }

    public static let appleURL = "https://api.appstoreconnect.apple.com"

    public let configuration: Configuration
    let key: AppStoreConnectKey
    let http: HTTPClient

    public init(configuration: Configuration = .init(), key: AppStoreConnectKey, http: HTTPClient = AppStoreServerAPI.httpClient) {
        self.configuration = configuration
        self.key = key
        self.http = http
    }

    public func summarySalesReport(day: String) async throws -> ReceivedSalesReport {
        for attempt in 1...2 {
            let (status, headers, body) = try await get(day: day)
            switch status {
            case 200:
                let file = try Self.parse(body, day: day)
                return ReceivedSalesReport(content: body, reportDate: file.reportDate, columns: file.columns, lines: file.lines,
                                           otherLines: file.otherLines, source: "app-store-connect", vendorNumber: key.vendorNumber)
            case 404:
                let detail = Self.detail(body)
                guard detail.lowercased().contains("no sales") else {
                    throw SalesReportFetchError.notAvailable("Apple has no report of \(day) yet (\(detail)): daily reports come the next morning")
                }
                // Apple's answer is the same for every such day: kept with the question it answers,
                // so that each day's "no sales" is a fact of its own.
                let answer = Data("GET /v1/salesReports vendor \(key.vendorNumber) reportDate \(day): 404\n".utf8) + body
                return ReceivedSalesReport(content: answer, reportDate: day, columns: [], lines: [], otherLines: 0,
                                           source: "app-store-connect (no sales)", vendorNumber: key.vendorNumber)
            case 429:
                let wait: Double = AppStoreServerAPI.retryAfter(headers.first(name: "Retry-After"), now: Date()).map { $0.timeIntervalSinceNow } ?? 60
                guard attempt == 1, wait <= configuration.longestWait.inSeconds else {
                    throw SalesReportFetchError.rateLimited("App Store Connect asks to slow down: try again in \(Int(wait.rounded(FloatingPointRoundingRule.up))) s")
                }
                try await Task.sleep(for: .seconds(max(wait, 0)))
            case 401, 403:
                throw SalesReportFetchError.refused(
                    "App Store Connect refused the key \(key.keyID) (\(status): \(Self.detail(body))): it needs the Sales or Finance role, and the vendor number \(key.vendorNumber) must be the team's"
                )
            case 500...599:
                throw SalesReportFetchError.unavailable("App Store Connect answered \(status) for \(day): try again later")
            default:
                throw SalesReportFetchError.refused("App Store Connect answered \(status) for \(day): \(Self.detail(body))")
            }
        }
        throw SalesReportFetchError.rateLimited("App Store Connect asks to slow down: try again later")
    }

    private func get(day: String) async throws -> (UInt, HTTPHeaders, Data) {
        let query = [("filter[frequency]", "DAILY"), ("filter[reportDate]", day), ("filter[reportSubType]", "SUMMARY"),
                     ("filter[reportType]", "SALES"), ("filter[vendorNumber]", key.vendorNumber), ("filter[version]", "1_0")]
            .map { "\($0.0)=\($0.1)" }  // brackets as Apple's documentation writes them
            .joined(separator: "&")
        var request = HTTPClientRequest(url: configuration.baseURL + "/v1/salesReports?" + query)
        request.headers.add(name: "Authorization", value: "Bearer \(try token(now: Date()))")
        request.headers.add(name: "Accept", value: "application/a-gzip, application/json")
        let deadline = NIODeadline.now() + .nanoseconds(Int64(configuration.timeout.inSeconds * 1_000_000_000))
        do {
            let response = try await http.execute(request, deadline: deadline)
            let body = try await response.body.collect(upTo: 256 << 20)
            if (300...399).contains(response.status.code) {
                throw SalesReportFetchError.refused("App Store Connect answered a redirect (\(response.status.code)), which the ledger does not follow: the token would go with it")
            }
            return (response.status.code, response.headers, Data(body.readableBytesView))
        } catch let error as SalesReportFetchError {
            throw error
        } catch {
            throw SalesReportFetchError.unavailable("App Store Connect did not answer for \(day): \(AppStoreServerAPI.describe(error))")
        }
    }

    /// A token for App Store Connect: ES256 by the team key, audience `appstoreconnect-v1`, 20 minutes.
    public func token(now: Date) throws -> String {
        do {
            return try AppStoreConnectToken.sign(keyID: key.keyID, issuerID: key.issuerID, privateKeyPEM: key.privateKeyPEM, bundleId: nil, now: now)
        } catch {
            throw SalesReportFetchError.refused("the App Store Connect key \(key.keyID) is not a P-256 private key in PEM: set it again with `ledger reports connect-key`")
        }
    }

    static func parse(_ body: Data, day: String) throws(SalesReportFetchError) -> SalesReportFile {
        let parsed = Result { () throws(SalesReportError) -> SalesReportFile in try SalesReportParser.parse(body, reportDate: day) }
        switch parsed {
        case .success(let file): return file
        case .failure(let error): throw .malformed("Apple's report of \(day) cannot be read: \(error.message)")
        }
    }

    /// Apple's error detail, or the body's start.
    static func detail(_ body: Data) -> String {
        if let errors = ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["errors"] as? [[String: Any]],
           let detail = errors.first?["detail"] as? String {
            return detail
        }
        return String(decoding: body.prefix(200), as: UTF8.self)
    }
}
