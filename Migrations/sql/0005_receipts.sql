-- What devices posted and what the App Store answered, kept as sent.
--
-- The log records each transaction's fields as facts; these tables keep the documents they came
-- from, so that a later fix can re-read a field the ledger does not use yet. Both are
-- content-addressed (the SHA-256 of the receipt as posted, of the answer as received) and
-- append-only like ledger.events: the same receipt or answer twice is stored once, and nothing
-- stored is ever changed or removed.

CREATE TABLE ledger.receipts (
    receipt_hash    text        PRIMARY KEY CHECK (receipt_hash ~ '^[0-9a-f]{64}$'),
    app             text        NOT NULL,
    receipt_data    text        NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

COMMENT ON TABLE ledger.receipts IS 'Every receipt a device posted and the App Store verified, by the SHA-256 of its text (receipt_hash in ReceiptPosted and AppStoreTransactionObserved). Append-only.';

CREATE TABLE ledger.receipt_answers (
    answer_hash     text        PRIMARY KEY CHECK (answer_hash ~ '^[0-9a-f]{64}$'),
    -- No foreign key: checking one takes a row lock, which needs UPDATE, which nobody has here.
    -- ReceiptArchive writes the receipt and its answer in one statement.
    receipt_hash    text        NOT NULL,
    environment     text        NOT NULL CHECK (environment IN ('production', 'sandbox')),
    status          integer     NOT NULL,
    answered_at     timestamptz NOT NULL,
    answer          text        NOT NULL,  -- byte for byte as the App Store sent it (JSON)
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX receipt_answers_receipt ON ledger.receipt_answers (receipt_hash, answered_at);

COMMENT ON TABLE ledger.receipt_answers IS 'Every distinct verifyReceipt answer, by the SHA-256 of its bytes as received (answer_hash in ReceiptPosted). Append-only.';

CREATE FUNCTION ledger.refuse_document_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'LW003',
              HINT = 'Receipts and answers are kept as the App Store and the devices sent them.';
END
$$;

CREATE TRIGGER receipts_refuse_update_delete BEFORE UPDATE OR DELETE ON ledger.receipts
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_document_change();
CREATE TRIGGER receipts_refuse_truncate BEFORE TRUNCATE ON ledger.receipts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_document_change();
CREATE TRIGGER receipt_answers_refuse_update_delete BEFORE UPDATE OR DELETE ON ledger.receipt_answers
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_document_change();
CREATE TRIGGER receipt_answers_refuse_truncate BEFORE TRUNCATE ON ledger.receipt_answers
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_document_change();

REVOKE ALL ON ledger.receipts, ledger.receipt_answers FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON ledger.receipts, ledger.receipt_answers FROM %I', current_user);
END
$$;
