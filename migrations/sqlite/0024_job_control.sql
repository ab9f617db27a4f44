ALTER TABLE `job_requests` ADD `held_at` integer;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `held_by` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `spec_changed_at` integer;