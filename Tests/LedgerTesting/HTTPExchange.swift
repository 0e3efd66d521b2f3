import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// A logger that keeps test output to warnings and worse.
public let quietLogger: Logger = {
    var logger = Logger(label: "ledger-tests")
    logger.logLevel = .warning
    return logger
}()

/// One HTTP exchange with a JSON body, for admin calls and raw `verifyReceipt` posts.
public func sendJSON(_ method: HTTPMethod, _ url: String, _ body: [String: Any]? = nil) async throws -> (status: Int, json: Any?) {
    var request = HTTPClientRequest(url: url)
    request.method = method
    if let body {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
    let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
    let data = Data(bytes.readableBytesView)
    let json = data.isEmpty ? nil : try? JSONSerialization.jsonObject(with: data)
    return (Int(response.status.code), json)
}
