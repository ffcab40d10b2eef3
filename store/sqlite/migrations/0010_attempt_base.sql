-- Issue 19: a run asked for by hand (Retry) starts fresh. attempt keeps growing, since
-- the fences compare it (rule 4), so the attempts spent before the last manual retry
-- are kept apart, and the retry backoff counts from them.
ALTER TABLE jobs ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;
