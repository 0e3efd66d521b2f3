import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerStore
import LocalPostgres

extension Audit {
    struct AnchorKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "anchor-key",
            abstract: "Create the Ed25519 key that signs anchors of the log.",
            discussion: """
                Writes the private key to FILE (PEM, created with mode 0600; an existing file is never \
                overwritten) and its public key to FILE.pub, and prints the public key. Keep FILE away from \
                the database server and its administrators: whoever holds it can sign an anchor of a changed \
                log. Give FILE.pub to whoever verifies (`ledger audit verify --anchor A --public-key FILE.pub`).
                """
        )

        @Option(help: ArgumentHelp("Where to write the private key; the public key goes to FILE.pub.", valueName: "file"))
        var out: String

        func run() async throws {
            let key: AnchorSigningKey
            do {
                key = try AnchorSigningKey.create(at: out)
            } catch {
                throw CommandFailure(message: error.message)
            }
            Output.error("wrote the anchor signing key to \(out) (mode 0600) and its public key to \(out).pub")
            Output.error("keep \(out) off the database server; verifiers need only \(out).pub")
            Output.line("public key: \(key.publicKey.base64) (\(key.publicKey.fingerprint))")
        }
    }

    struct Anchor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a signed anchor of the log: every stream's head and the log's head, now.",
            discussion: """
                Reads every stream's last version and hash, the highest position and the number of events \
                in one snapshot, and writes them with a Merkle root over the heads, signed with the Ed25519 \
                key, as JSON. Keep anchors outside the database (another host, write-once storage): \
                `ledger audit verify --anchor FILE` then finds streams truncated, deleted or rewritten since. \
                The file lists every stream id, so every user id: it is created readable by owner and group only.
                """
        )

        @OptionGroup var options: GlobalOptions

        @Option(help: ArgumentHelp("The private key from `ledger audit anchor-key` (default: $LEDGER_ANCHOR_KEY_FILE). It must not be readable by others.", valueName: "file"))
        var key: String?

        @Option(help: ArgumentHelp("Where to write the anchor, a new file (never overwritten), or - for standard output.", valueName: "file"))
        var out: String

        func run() async throws {
            let (signingKey, keyPath) = try Audit.signingKey(key)
            let logger = try options.makeLogger()
            let settings = try await options.databaseSettings(logger: logger)
            let summary: LogAnchorSummary
            do {
                summary = try await LedgerDatabase.withClient(settings, logger: logger) { client in
                    let builder = LogAnchorBuilder(client: client, logger: logger)
                    let progress: @Sendable (Int) -> Void = { heads in Output.error("read \(heads) stream heads") }
                    return out == "-"
                        ? try await builder.write(to: FileHandle.standardOutput, signingWith: signingKey, progress: progress)
                        : try await builder.write(toNewFile: out, signingWith: signingKey, progress: progress)
                }
            } catch let error as LogAnchorError {
                throw CommandFailure(message: error.message)
            }
            let destination = out == "-" ? "standard output" : out
            Output.error("""
                anchored the log at position \(summary.logHeadPosition): \(summary.eventCount) events in \(summary.streamCount) streams, as of \(summary.createdAt)
                Merkle root \(summary.merkleRootHex), signed by \(summary.publicKey.fingerprint); written to \(destination)
                keep it outside the database; check the log against it with `ledger audit verify --anchor FILE --public-key \(keyPath).pub`
                """)
        }
    }
}
