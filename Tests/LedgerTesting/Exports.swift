@_exported import LedgerDomainTesting
@_exported import LocalPostgres
