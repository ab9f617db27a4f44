-- A request accepted through the prepared insert stored a missing `needs` or `deadlines` as the
-- JSON text 'null', not SQL NULL: the deadline check (deadlines is not null) then read every
-- unfinished request on every tick. Read back, both mean null.
UPDATE `job_requests` SET `deadlines` = NULL WHERE `deadlines` = 'null';--> statement-breakpoint
UPDATE `job_requests` SET `needs` = NULL WHERE `needs` = 'null';
