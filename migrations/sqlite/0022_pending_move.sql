ALTER TABLE `job_requests` ADD `pending_move` text;--> statement-breakpoint
CREATE INDEX `job_requests_pending_move` ON `job_requests` (`state`) WHERE "pending_move" is not null;