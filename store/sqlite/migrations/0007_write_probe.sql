-- One row that readiness (GET /readyz) rewrites after a write failed (a full disk, a
-- read-only file), to learn whether writing works again before a job needs it to.
CREATE TABLE write_probe (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
);
