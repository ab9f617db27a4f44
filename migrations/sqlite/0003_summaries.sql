CREATE TABLE `llm_usage` (
	`day` text PRIMARY KEY NOT NULL,
	`requests` integer DEFAULT 0 NOT NULL,
	`tokens` integer DEFAULT 0 NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `summaries` (
	`id` text PRIMARY KEY NOT NULL,
	`request_id` text,
	`run_id` text,
	`state` text NOT NULL,
	`kind` text,
	`text` text,
	`note` text,
	`model` text,
	`prompt_tokens` integer,
	`completion_tokens` integer,
	`latency_ms` integer,
	`attempts` integer DEFAULT 0 NOT NULL,
	`error_code` text,
	`error` text,
	`findings` text,
	`suggestion` text,
	`applied_request_id` text,
	`applied_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`completed_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `summaries_request` ON `summaries` (`request_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `summaries_run` ON `summaries` (`run_id`);--> statement-breakpoint
CREATE INDEX `summaries_state` ON `summaries` (`state`,`created_at`);--> statement-breakpoint
ALTER TABLE `job_requests` ADD `summarize` integer;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `summary_checked_at` integer;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `resubmit_of` text;--> statement-breakpoint
CREATE INDEX `job_requests_summary_todo` ON `job_requests` (`state`) WHERE "summary_checked_at" is null;--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `summary_checked_at` integer;--> statement-breakpoint
CREATE INDEX `pipeline_runs_summary_todo` ON `pipeline_runs` (`state`) WHERE "summary_checked_at" is null;--> statement-breakpoint
-- Requests and runs that ended before summaries existed are not summarized after an upgrade.
UPDATE `job_requests` SET `summary_checked_at` = `updated_at` WHERE `state` IN ('completed', 'failed', 'timeout', 'cancelled', 'node_fail', 'out_of_memory', 'preempted', 'boot_fail', 'deadline', 'submit_failed');--> statement-breakpoint
UPDATE `pipeline_runs` SET `summary_checked_at` = `updated_at` WHERE `state` IN ('succeeded', 'failed', 'cancelled', 'skipped');
