-- An announcement ends: when its report has run, or at the end of its window (a report that
-- never ran). Until then the policies that name the report fire; after, they stop.
ALTER TABLE sketch.report_announcements ADD COLUMN ends_at timestamptz;
UPDATE sketch.report_announcements SET ends_at = due_at + interval '1 hour';
ALTER TABLE sketch.report_announcements ALTER COLUMN ends_at SET NOT NULL;
