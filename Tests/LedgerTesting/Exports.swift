@_exported import LedgerDomainTesting
