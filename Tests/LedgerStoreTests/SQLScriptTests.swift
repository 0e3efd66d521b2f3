@testable import LedgerStore
import Testing

@Suite("Migration scripts split into statements")
struct SQLScriptTests {
    @Test("semicolons inside dollar-quoted bodies, strings and comments do not end a statement")
    func quotedSemicolons() {
        let script = SQLScript("""
            -- a comment; with a semicolon
            CREATE TABLE a (x text DEFAULT 'a;b');
            CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$
            BEGIN
                RETURN 1; -- inside
            END
            $$;
            /* block; comment */ SELECT "odd;name" FROM a;
            DO $body$ BEGIN PERFORM 1; END $body$;
            SELECT 'it''s; fine'
            """)
        #expect(script.statements.count == 5)
        #expect(script.statements[0].hasSuffix("CREATE TABLE a (x text DEFAULT 'a;b')"))
        #expect(script.statements[1].contains("RETURN 1; -- inside"))
        #expect(script.statements[2].contains(#""odd;name""#))
        #expect(script.statements[3] == "DO $body$ BEGIN PERFORM 1; END $body$")
        #expect(script.statements[4] == "SELECT 'it''s; fine'")
    }

    @Test("a script of only comments has no statements")
    func onlyComments() {
        #expect(SQLScript("-- nothing here;\n\n-- still nothing\n").statements.isEmpty)
    }

    @Test("the shipped migrations split into statements that each start with SQL")
    func shippedMigrations() throws {
        for migration in try Migrator.bundled().migrations {
            let statements = SQLScript(migration.sql).statements
            #expect(!statements.isEmpty)
            for statement in statements {
                let start = statement.split(separator: "\n").first { !$0.hasPrefix("--") && !$0.isEmpty } ?? ""
                #expect(start.first?.isLetter == true, "\(migration.name): \(statement.prefix(60))")
            }
        }
    }
}
