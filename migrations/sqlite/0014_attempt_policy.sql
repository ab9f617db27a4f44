ALTER TABLE `job_requests` ADD `retry_policy` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `first_attempt_id` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `retry_cause` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `retry_due_at` integer;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `next_attempt_id` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `retry_note` text;--> statement-breakpoint
CREATE INDEX `job_requests_retry_due` ON `job_requests` (`retry_due_at`) WHERE "retry_due_at" is not null;--> statement-breakpoint
CREATE INDEX `job_requests_attempts` ON `job_requests` (`first_attempt_id`);