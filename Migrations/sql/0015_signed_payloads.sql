-- StoreKit 2 transactions and App Store Server Notifications V2.
--
-- Signed payloads are recorded in Apple's own naming (`productId`, `originalTransactionId`,
-- `appAccountToken`), beside verifyReceipt's (`product_id`, …).
--
-- 1. A catalog change finds the users who recorded something of a product through
--    events_product; a signed observation names its product `productId` inside `fields`. The
--    index is replaced by one over both namings (ProjectionBatchWriter queries this expression).
DROP INDEX ledger.events_product;
CREATE INDEX events_product ON ledger.events
    ((COALESCE(data -> 'fields' ->> 'product_id', data -> 'fields' ->> 'productId', data ->> 'productId')), position)
    WHERE COALESCE(data -> 'fields' ->> 'product_id', data -> 'fields' ->> 'productId', data ->> 'productId') IS NOT NULL;

-- 2. A notification names no user: it is the user's who holds its original transaction, or whose
--    transactions carry its appAccountToken (the app's id for the user, set at purchase). Only
--    observations that carry a token are indexed.
CREATE INDEX events_app_account_token ON ledger.events ((data -> 'fields' ->> 'appAccountToken'), position)
    WHERE data -> 'fields' ->> 'appAccountToken' IS NOT NULL AND stream_id LIKE 'user/%';

-- 3. Notifications no user held when they came wait on `notifications/<bundle id>` until a user
--    posts their transaction: found by original transaction or by token.
CREATE INDEX events_unmapped_notifications ON ledger.events
    (stream_id, (COALESCE(data -> 'transaction' ->> 'originalTransactionId', data -> 'renewalInfo' ->> 'originalTransactionId')))
    WHERE stream_id LIKE 'notifications/%';
CREATE INDEX events_unmapped_notification_tokens ON ledger.events (stream_id, (data -> 'transaction' ->> 'appAccountToken'))
    WHERE stream_id LIKE 'notifications/%' AND data -> 'transaction' ->> 'appAccountToken' IS NOT NULL;
