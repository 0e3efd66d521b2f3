-- App Store shared secrets are kept sealed (AES-256-GCM, bound to the app's bundle id).
--
-- The key never reaches the database: it comes from LEDGER_SECRET_KEY, LEDGER_SECRET_KEY_FILE or,
-- with the managed local server, a key file under the ledger's home. A secret is sealed by the
-- program, so this migration only makes room: secrets stored in plaintext (0003) stay where they
-- are and keep working until the program, holding a key, seals them (`ledger serve`, `ledger apps`)
-- in the same row and transaction: the plaintext is cleared only as its sealed form is written.
--
-- The constraints say what a row may hold: no secret, a plaintext one (from before), or a sealed
-- one with the id of its key; never two at once.

ALTER TABLE ledger.apps
    ADD COLUMN shared_secret_sealed bytea,
    -- Names the key that sealed it (an HMAC of a fixed label under the key, not the key).
    ADD COLUMN shared_secret_key_id text,
    ADD CONSTRAINT apps_one_shared_secret CHECK (shared_secret IS NULL OR shared_secret_sealed IS NULL),
    ADD CONSTRAINT apps_sealed_secret_names_its_key CHECK ((shared_secret_sealed IS NULL) = (shared_secret_key_id IS NULL));

COMMENT ON COLUMN ledger.apps.shared_secret IS 'An App Store shared secret stored before 0008, in plaintext; sealed and cleared by the program.';
COMMENT ON COLUMN ledger.apps.shared_secret_sealed IS 'The App Store shared secret, AES-256-GCM with the bundle id as authenticated data; never logged or returned.';
COMMENT ON COLUMN ledger.apps.shared_secret_key_id IS 'The id of the key that sealed shared_secret_sealed.';
