-- Projection checkpoints only move forward, and say when they last moved.
--
-- A checkpoint (ledger.projections.position) is what `minPosition` reads wait for: once a read
-- was answered at position p, no later read may be answered below p. The runner moves it only
-- from the position it read, and a rebuild's switch-over brings its rows up to the live
-- checkpoint before taking over; this trigger makes the rule the database's, so that no code
-- path (an older server during a deploy, a hand-written UPDATE) can move one back.
--
-- checkpoint_moved_at is when the position last increased: `/health` compares it with the log's
-- head to tell a projection that is behind but moving from one that has stopped, without
-- counting events (constant time, however long the log).

ALTER TABLE ledger.projections ADD COLUMN checkpoint_moved_at timestamptz NOT NULL DEFAULT now();

COMMENT ON COLUMN ledger.projections.checkpoint_moved_at IS
    'When position last increased (or the version was registered); /health reports a stall when it stops while the log head moves.';

CREATE FUNCTION ledger.guard_projection_checkpoint() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.position < OLD.position THEN
        RAISE EXCEPTION 'the checkpoint of projection % v% would move back from % to %', OLD.name, OLD.version, OLD.position, NEW.position
            USING ERRCODE = 'LW010',
                  HINT = 'A checkpoint only moves forward: bring the rows up to the current checkpoint first (a rebuild does).';
    END IF;
    IF NEW.position > OLD.position THEN
        NEW.checkpoint_moved_at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER projections_checkpoint_forward_only
    BEFORE UPDATE OF position ON ledger.projections
    FOR EACH ROW EXECUTE FUNCTION ledger.guard_projection_checkpoint();
