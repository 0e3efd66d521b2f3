import Foundation
import Testing

/// README.md and docs/ name files, folders and each other's sections; a name that no longer
/// exists sends a newcomer nowhere. Every relative link must lead to a file (and its anchor to a
/// heading there), and every path or file name in backticks must exist in the tree.
@Suite struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The pages a newcomer reads.
    static var pages: [URL] {
        let docs = root.appendingPathComponent("docs")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []
        return [root.appendingPathComponent("README.md")] + names.filter { $0.hasSuffix(".md") }.sorted().map { docs.appendingPathComponent($0) }
    }

    /// Every file of the tree, relative to the root, outside build output and git's own folder.
    static let tree: Set<String> = {
        var files = Set<String>()
        let skipped: Set<String> = [".build", ".git", ".ledger", ".swiftpm"]
        guard let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isDirectoryKey]) else { return files }
        for case let url as URL in walk {
            let relative = String(url.path.dropFirst(root.path.count + 1))
            if skipped.contains(where: { relative == $0 || relative.hasPrefix($0 + "/") || relative.hasPrefix(".build") }) {
                walk.skipDescendants()
                continue
            }
            files.insert(relative)
        }
        return files
    }()

    /// Files the ledger makes when it runs (under `.ledger/`), which the documentation names.
    static let writtenAtRunTime: Set<String> = ["postgres.json", "secret.key"]

    /// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
    static func anchor(_ heading: String) -> String {
        heading.lowercased().filter { $0.isLetter || $0.isNumber || $0 == " " || $0 == "-" || $0 == "_" }
            .replacingOccurrences(of: " ", with: "-")
    }

    static func anchors(of page: URL) throws -> Set<String> {
        let text = try String(contentsOf: page, encoding: .utf8)
        var inCode = false
        var found = Set<String>()
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, line.hasPrefix("#") else { continue }
            found.insert(anchor(String(line.drop { $0 == "#" }.drop { $0 == " " })))
        }
        return found
    }

    @Test("every relative link of README.md and docs/ leads to a file, and every anchor to a heading of it")
    func links() throws {
        #expect(Self.pages.count > 1, "README.md and docs/")
        let link = /\]\(([^)\s]+)\)/
        var broken: [String] = []
        for page in Self.pages {
            let text = try String(contentsOf: page, encoding: .utf8)
            for match in text.matches(of: link) {
                let target = String(match.output.1)
                guard !target.hasPrefix("http://"), !target.hasPrefix("https://"), !target.hasPrefix("mailto:") else { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = parts[0].isEmpty ? page : page.deletingLastPathComponent().appendingPathComponent(String(parts[0])).standardizedFileURL
                guard FileManager.default.fileExists(atPath: file.path) else {
                    broken.append("\(page.lastPathComponent) → \(target) (no such file)")
                    continue
                }
                if parts.count == 2, file.pathExtension == "md", !(try Self.anchors(of: file).contains(String(parts[1]))) {
                    broken.append("\(page.lastPathComponent) → \(target) (no such heading)")
                }
            }
        }
        #expect(broken.isEmpty, "\(broken)")
    }

    @Test("every file path and file name README.md and docs/ name in backticks exists in the tree")
    func paths() throws {
        let code = /`([^`\s]+)`/
        let topLevel = ["Sources/", "Tests/", "Benchmarks/", "Projections/", "Migrations/", "docs/", "scripts/", ".ci/"]
        let fileEndings = [".swift", ".sql", ".md", ".json", ".sh", ".html", ".js", ".css", ".png", ".pem", ".cer"]
        let names = Set(Self.tree.map { String($0.split(separator: "/").last ?? "") })
        var missing: [String] = []
        for page in Self.pages {
            let text = try String(contentsOf: page, encoding: .utf8)
            for match in text.matches(of: code) {
                var named = String(match.output.1)
                if let colon = named.firstIndex(of: ":"), named[..<colon].contains(".") { named = String(named[..<colon]) }
                // Placeholders (`NNNN_description.sql`, `FILE.pem`) and what the ledger writes at run time are no files of the tree.
                guard !named.contains("NNNN"), !named.contains("*"), named.first(where: \.isLetter).map({ !$0.isUppercase || named.contains("/") || named.contains("+") || named.hasSuffix(".swift") || named.hasSuffix(".md") }) ?? false,
                      !Self.writtenAtRunTime.contains(named)
                else { continue }
                if topLevel.contains(where: { named.hasPrefix($0) }) {
                    let trimmed = named.hasSuffix("/") ? String(named.dropLast()) : named
                    if !Self.tree.contains(trimmed) { missing.append("\(page.lastPathComponent): \(named)") }
                } else if !named.contains("/"), fileEndings.contains(where: { named.hasSuffix($0) }), !names.contains(named) {
                    missing.append("\(page.lastPathComponent): \(named)")
                }
            }
        }
        #expect(missing.isEmpty, "named in the documentation, nowhere in the tree: \(missing)")
    }
}
