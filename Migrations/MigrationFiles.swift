import Foundation

/// The SQL migration files shipped with the ledger, as resources of this target.
public enum MigrationFiles {
    /// Every `.sql` file, sorted by name (names start with their number).
    public static func all() -> [URL] {
        guard let folder = Bundle.module.url(forResource: "sql", withExtension: nil),
              let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path)
        else { return [] }
        return names.filter { $0.hasSuffix(".sql") }.sorted().map { folder.appendingPathComponent($0) }
    }
}
