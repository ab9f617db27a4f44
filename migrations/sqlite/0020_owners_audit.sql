CREATE TABLE `audit_log` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` integer NOT NULL,
	`actor` text NOT NULL,
	`owner` text,
	`action` text NOT NULL,
	`target` text,
	`outcome` text NOT NULL,
	`http_request_id` text,
	`detail` text
);
--> statement-breakpoint
CREATE INDEX `audit_log_at` ON `audit_log` (`at`);--> statement-breakpoint
CREATE INDEX `audit_log_owner` ON `audit_log` (`owner`,`at`);--> statement-breakpoint
ALTER TABLE `api_tokens` ADD `owner` text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE `api_tokens` ADD `profiles` text;--> statement-breakpoint
ALTER TABLE `api_tokens` ADD `max_in_flight` integer;--> statement-breakpoint
ALTER TABLE `api_tokens` ADD `max_per_day` integer;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `owner` text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `actor` text;--> statement-breakpoint
CREATE INDEX `job_requests_owner` ON `job_requests` (`owner`,`created_at`);--> statement-breakpoint
CREATE INDEX `job_requests_owner_state` ON `job_requests` (`owner`,`state`);--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `owner` text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `actor` text;--> statement-breakpoint
CREATE INDEX `pipeline_runs_owner` ON `pipeline_runs` (`owner`,`created_at`);