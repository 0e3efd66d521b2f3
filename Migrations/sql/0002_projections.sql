-- Projections: read models derived from ledger.events, each with a version.
--
-- A projection version's tables are ledger.<name>_v<version>; the view ledger.<name>
-- points at the live version, so readers never name a version. Each version keeps its
-- checkpoint here, written in the same transaction as its rows.

CREATE TABLE ledger.projections (
    name            text        NOT NULL,
    version         integer     NOT NULL CHECK (version >= 1),
    -- The last log position applied; every event up to it is reflected in the tables.
    position        bigint      NOT NULL DEFAULT 0,
    status          text        NOT NULL CHECK (status IN ('building', 'live', 'failed', 'retired')),
    error           text,
    error_position  bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

COMMENT ON TABLE ledger.projections IS
    'Each projection version: its checkpoint (position), status (building, live, failed, retired) and, when failed, why and where.';
