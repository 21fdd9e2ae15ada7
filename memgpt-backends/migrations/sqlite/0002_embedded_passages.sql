-- Embedded passages of an agent, without reading their (large) embedding blobs: the exact
-- scan's keyset walk and the usearch watermark check use this partial index.
CREATE INDEX passages_embedded ON passages (agent_id, seq) WHERE embedding IS NOT NULL;
