-- The followers' horizon, limited to this database.
--
-- Followers read only rows of transactions older than every append still running (see
-- 0001). pg_snapshot_xmin alone counts running transactions of every database of the
-- server: a DROP DATABASE elsewhere, which waits for a checkpoint while holding its
-- transaction id, held every projection of this ledger back for 26 s in a measured run.
--
-- A transaction of another database cannot append here, so it may be passed over; but only
-- when it is seen running in that other database. A transaction that ended since the
-- snapshot was taken cannot be placed, and still holds the horizon back (until the next
-- read): that delays, it never skips. Prepared transactions are not listed in
-- pg_stat_activity and count as this database's.
--
-- Called once per read, as an uncorrelated subquery, so that the snapshot it reads is the
-- snapshot of the statement that reads the rows.

CREATE FUNCTION ledger.follow_horizon() RETURNS xid8
LANGUAGE sql STABLE PARALLEL RESTRICTED AS $$
    WITH snapshot AS MATERIALIZED (
        SELECT pg_current_snapshot() AS current
    ), elsewhere AS MATERIALIZED (
        SELECT a.backend_xid
        FROM pg_stat_activity a
        WHERE a.backend_xid IS NOT NULL
          AND a.datid IS DISTINCT FROM (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
    )
    SELECT coalesce(
        (SELECT min(running)
         FROM snapshot, pg_snapshot_xip(snapshot.current) AS running
         WHERE NOT EXISTS (SELECT 1 FROM elsewhere WHERE elsewhere.backend_xid = xid(running))),
        (SELECT pg_snapshot_xmax(snapshot.current) FROM snapshot)
    )
$$;

COMMENT ON FUNCTION ledger.follow_horizon() IS
    'Followers read rows whose transaction_id is below this: the oldest transaction running in this database (or possibly ended), else the snapshot''s xmax.';
