import AsyncHTTPClient
import Foundation
import LedgerTesting
import NIOCore
import NIOHTTP1
import Testing

/// A real headless Chromium, driven through chromedriver's W3C WebDriver protocol (JSON over
/// HTTP on loopback). Debian's `chromium` and `chromium-driver` packages provide both; `.ci/run`
/// installs them when missing, and without them the browser tests fail rather than skip.
final class Browser: @unchecked Sendable {
    let session: String
    let driverBase: String
    let driver: ChildProcess
    /// Where the browser saves downloads.
    let downloads: URL

    /// Artefacts of the browser tests (screenshots), under `.build/` so they are never committed.
    static let artefacts: URL = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/finance-page", isDirectory: true)
    }()

    static func program(_ names: [String]) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin", "/usr/lib/chromium"] {
            for name in names {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    /// Progress on standard error with LEDGER_TEST_TRACE=1, for a browser test that seems stuck.
    static func trace(_ line: @autoclosure () -> String) {
        guard ProcessInfo.processInfo.environment["LEDGER_TEST_TRACE"] == "1" else { return }
        FileHandle.standardError.write(Data("browser: \(line())\n".utf8))
    }

    private init(session: String, driverBase: String, driver: ChildProcess, downloads: URL) {
        self.session = session
        self.driverBase = driverBase
        self.driver = driver
        self.downloads = downloads
    }

    /// Runs `body` with a fresh browser of the given window size; the browser and its driver stop afterwards.
    static func with<T: Sendable>(width: Int = 1280, height: Int = 800, _ body: @Sendable (Browser) async throws -> T) async throws -> T {
        let chromium = try #require(program(["chromium", "chromium-browser", "google-chrome"]),
                                    "Chromium is missing: apt-get install chromium chromium-driver (.ci/run does)")
        let chromedriver = try #require(program(["chromedriver"]), "chromedriver is missing: apt-get install chromium-driver (.ci/run does)")
        let downloads = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-browser-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: artefacts, withIntermediateDirectories: true)

        var lastFailure = "chromedriver did not start"
        for _ in 0..<5 {
            let port = Int.random(in: 20_000...40_000)
            let driver = try ChildProcess(URL(fileURLWithPath: chromedriver), ["--port=\(port)", "--allowed-ips=127.0.0.1"])
            trace("chromedriver started on port \(port)")
            let base = "http://127.0.0.1:\(port)"
            var ready = false
            for _ in 0..<100 where driver.isRunning {
                if let status = try? await call(base, .GET, "/status"), (status as? [String: Any])?["ready"] as? Bool == true {
                    ready = true
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            guard ready else {
                lastFailure = "chromedriver on port \(port) did not become ready"
                stop(driver)
                continue
            }
            let capabilities: [String: Any] = ["capabilities": ["alwaysMatch": [
                "browserName": "chrome",
                "goog:chromeOptions": [
                    "binary": chromium,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=\(width),\(height)",
                             "--lang=en-US"],
                    "prefs": ["download.default_directory": downloads.path, "download.prompt_for_download": false],
                ],
            ]]]
            do {
                trace("chromedriver ready; opening a session")
                let created = try await call(base, .POST, "/session", capabilities)
                trace("session open")
                let session = try #require((created as? [String: Any])?["sessionId"] as? String, "no session: \(String(describing: created))")
                let browser = Browser(session: session, driverBase: base, driver: driver, downloads: downloads)
                do {
                    let result = try await body(browser)
                    await browser.close()
                    return result
                } catch {
                    await browser.close()
                    throw error
                }
            } catch let error as WebDriverError {
                lastFailure = error.description
                stop(driver)
            }
        }
        throw HarnessError(message: lastFailure)
    }

    /// chromedriver outlives SIGTERM at times; it holds nothing worth a clean exit once its session is gone.
    private static func stop(_ driver: ChildProcess) {
        if driver.isRunning { kill(driver.processIdentifier, SIGKILL) }
    }

    private func close() async {
        _ = try? await Self.call(driverBase, .DELETE, "/session/\(session)")
        Self.stop(driver)
        for _ in 0..<50 where driver.isRunning { try? await Task.sleep(for: .milliseconds(100)) }
        try? FileManager.default.removeItem(at: downloads)
    }

    struct WebDriverError: Error, CustomStringConvertible {
        let description: String
    }

    /// One WebDriver command; returns its `value`.
    @discardableResult
    static func call(_ base: String, _ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> Any? {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
        let object = try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView), options: [.fragmentsAllowed])
        let value = (object as? [String: Any])?["value"]
        guard response.status.code < 300 else {
            let error = (value as? [String: Any]).map { "\($0["error"] ?? "?"): \($0["message"] ?? "")" } ?? String(buffer: bytes)
            throw WebDriverError(description: "\(method) \(path): \(response.status.code) \(error)")
        }
        return value
    }

    @discardableResult
    func command(_ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> Any? {
        Self.trace("\(method) \(path)")
        return try await Self.call(driverBase, method, "/session/\(session)" + path, body)
    }

    // MARK: What a test does

    func open(_ url: String) async throws {
        try await command(.POST, "/url", ["url": url])
    }

    /// The first element matching a CSS selector.
    func find(_ selector: String) async throws -> String {
        let found = try await command(.POST, "/element", ["using": "css selector", "value": selector]) as? [String: Any]
        return try #require(found?.values.first as? String, "no element \(selector)")
    }

    func type(_ selector: String, _ text: String) async throws {
        let element = try await find(selector)
        try await command(.POST, "/element/\(element)/clear", [:])
        try await command(.POST, "/element/\(element)/value", ["text": text])
    }

    func click(_ selector: String) async throws {
        try await command(.POST, "/element/\(try await find(selector))/click", [:])
    }

    /// Chooses the option whose value is `value` in a select, as a user would (click).
    func choose(_ selector: String, value: String) async throws {
        try await click("\(selector) option[value=\"\(value)\"]")
    }

    /// Presses keys on whatever has the focus (`\u{E007}` is Enter, `\u{E004}` Tab).
    func press(_ keys: String) async throws {
        let actions = keys.unicodeScalars.flatMap { key in
            [["type": "keyDown", "value": String(key)], ["type": "keyUp", "value": String(key)]]
        }
        try await command(.POST, "/actions", ["actions": [["type": "key", "id": "keyboard", "actions": actions]]])
    }

    /// Runs a script in the page (`return …` gives its value back as JSON).
    @discardableResult
    func run(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await command(.POST, "/execute/sync", ["script": script, "args": arguments])
    }

    func text(_ selector: String) async throws -> String {
        try await run("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", [selector]) as? String ?? ""
    }

    /// Waits until `script` returns true in the page.
    func wait(for what: String, timeout: Duration = .seconds(20), _ script: String, _ arguments: [Any] = []) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await run(script, arguments) as? Bool == true { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        let status = try await text("#status"), error = try await text("#sign-in-error")
        throw HarnessError(message: "waited \(timeout) for \(what); the page says: \(status) \(error)")
    }

    func resize(width: Int, height: Int) async throws {
        try await command(.POST, "/window/rect", ["width": width, "height": height])
    }

    /// Saves a screenshot of the viewport under `.build/finance-page/NAME.png`.
    func screenshot(_ name: String) async throws {
        let base64 = try #require(try await command(.GET, "/screenshot") as? String)
        let data = try #require(Data(base64Encoded: base64))
        try data.write(to: Self.artefacts.appendingPathComponent("\(name).png"))
    }

    /// Waits for a finished download and returns its bytes (Chromium writes `*.crdownload` first).
    func download(named name: String, timeout: Duration = .seconds(20)) async throws -> Data {
        let file = downloads.appendingPathComponent(name)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let partial = (try? FileManager.default.contentsOfDirectory(atPath: downloads.path))?.contains { $0.hasSuffix(".crdownload") } ?? false
            if !partial, let data = try? Data(contentsOf: file) { return data }
            try await Task.sleep(for: .milliseconds(100))
        }
        let present = (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? []
        throw HarnessError(message: "no download \(name) within \(timeout); the folder holds \(present)")
    }

    /// Forgets earlier downloads, so the next one is found under its own name.
    func clearDownloads() throws {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] {
            try FileManager.default.removeItem(at: downloads.appendingPathComponent(name))
        }
    }
}
