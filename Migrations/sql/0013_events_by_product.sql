-- Which users recorded something of a product: what a catalog change has to find.
--
-- Facts are judged with the catalog in force when they were recorded, so a product's definition
-- changes the rows of past facts only when it is the product's first: facts recorded while the
-- catalog did not know the product take that first definition. The projections then rewrite
-- the users with such facts, found here, instead of every user of the app.
--
-- The product of an event: Apple's `product_id` of an observed transaction, or the `productId`
-- of the events that name one (the version-1 verdicts, consumptions, failed purchases). The
-- expression is the one `ProjectionBatchWriter` queries with; only events naming a product are
-- indexed.
CREATE INDEX events_product ON ledger.events ((COALESCE(data -> 'fields' ->> 'product_id', data ->> 'productId')), position)
    WHERE COALESCE(data -> 'fields' ->> 'product_id', data ->> 'productId') IS NOT NULL;
