import AppStore
import AsyncHTTPClient
import Foundation
import LedgerDomain
import LedgerStore
import NIOCore
import NIOHTTP1

/// A small closed-loop load generator: `workers` tasks, each sending its share of requests one after
/// another over its own keep-alive connection, timing each from send to last body byte.
public struct HTTPLoad: Sendable {
    /// One request of the load.
    public struct Request: Sendable {
        public var method: HTTPMethod
        public var url: String
        public var headers: [(String, String)] = []
        public var body: ByteBuffer?
    }

    /// What one run measured.
    public struct Measurement: Sendable {
        public let requests: Int
        /// Answers whose status was not the expected one (they count in the latencies too).
        public let failures: Int
        public let seconds: Double
        /// Milliseconds.
        public let p50: Double
        public let p99: Double
        /// The CPU each measured process used meanwhile (empty without a meter).
        public var cpu: [CPUMeter.Use] = []

        public var perSecond: Double { Double(requests) / seconds }
    }

    public let http: HTTPClient

    public init(http: HTTPClient) {
        self.http = http
    }

    /// Sends every request, `workers` at a time; request i goes to worker i % workers.
    public func run(_ requests: [Request], workers: Int, expect: Int) async throws -> Measurement {
        let shares = (0..<workers).map { worker in stride(from: worker, to: requests.count, by: workers).map { requests[$0] } }
        let clock = ContinuousClock()
        let start = clock.now
        let (latencies, failures) = try await withThrowingTaskGroup(of: ([Double], Int).self) { group in
            for share in shares {
                group.addTask {
                    var latencies: [Double] = []
                    latencies.reserveCapacity(share.count)
                    var failures = 0
                    for request in share {
                        let started = clock.now
                        let status = try await send(request)
                        let elapsed = clock.now - started
                        latencies.append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
                        if status != expect { failures += 1 }
                    }
                    return (latencies, failures)
                }
            }
            var all: [Double] = []
            var failures = 0
            for try await (part, failed) in group {
                all += part
                failures += failed
            }
            return (all.sorted(), failures)
        }
        let elapsed = clock.now - start
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        return Measurement(
            requests: requests.count, failures: failures,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            p50: percentile(0.5), p99: percentile(0.99)
        )
    }

    /// Sends one request and reads its whole body; returns the status.
    public func send(_ request: Request) async throws -> Int {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = request.method
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(body) }
        let response = try await http.execute(outgoing, timeout: .seconds(60))
        _ = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return Int(response.status.code)
    }

    /// Sends one request and parses its JSON body.
    public func json(_ request: Request) async throws -> (status: Int, body: [String: Any]) {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = request.method
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(body) }
        let response = try await http.execute(outgoing, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        let body = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
        return (Int(response.status.code), body)
    }

    /// A request with a JSON body.
    public static func request(_ method: HTTPMethod, _ url: String, key: String? = nil, json: [String: Any]? = nil) throws -> Request {
        var request = Request(method: method, url: url)
        if let key { request.headers.append(("Authorization", "Bearer \(key)")) }
        if let json {
            request.headers.append(("Content-Type", "application/json"))
            request.body = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json))
        }
        return request
    }
}
