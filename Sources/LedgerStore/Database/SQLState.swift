import PostgresNIO

/// The SQLSTATE codes the ledger branches on, each named once.
public enum SQLState: String, Sendable, Hashable {
    /// Raised by `ledger.append` when the stream is not at the expected version (see
    /// `Migrations/sql/0001_event_log.sql`); the detail holds the stream's version.
    case wrongExpectedVersion = "LW001"
    case uniqueViolation = "23505"
    case checkViolation = "23514"
    case invalidTextRepresentation = "22P02"
    case invalidParameterValue = "22023"
    case insufficientPrivilege = "42501"
    case undefinedColumn = "42703"
    case undefinedTable = "42P01"
    case duplicateDatabase = "42P04"
    case duplicateObject = "42710"
    /// Raised by migration 0007 when the roles it grants to are missing or wrong.
    case rolesNotPrepared = "LW005"
    /// Raised by the projection functions of migration 0007 for a name that is not a projection's.
    case notAProjection = "LW006"
    /// Raised by `ledger.append` (migration 0011) when a deduplication key of the append is
    /// recorded in another stream; the detail is a JSON array of those events.
    case keyHeldByAnotherStream = "LW007"
    case invalidPassword = "28P01"
    case invalidAuthorizationSpecification = "28000"
    case invalidCatalogName = "3D000"
}

extension PSQLError {
    /// The server's SQLSTATE, when the server refused the statement with one the ledger knows.
    public var ledgerSQLState: SQLState? { serverInfo?[.sqlState].flatMap(SQLState.init(rawValue:)) }
}
