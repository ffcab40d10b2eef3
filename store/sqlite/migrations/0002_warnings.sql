-- Warnings a successful attempt recorded (e.g. text cut at Excel's cell limit), as a
-- JSON array of strings.
ALTER TABLE jobs ADD COLUMN warnings TEXT;
