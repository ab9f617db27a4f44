CREATE TABLE `api_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` integer NOT NULL,
	`last_used_at` integer,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_tokens_name_unique` ON `api_tokens` (`name`);--> statement-breakpoint
CREATE UNIQUE INDEX `api_tokens_hash_unique` ON `api_tokens` (`hash`);--> statement-breakpoint
CREATE TABLE `deadline_misses` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`subject` text NOT NULL,
	`request_id` text,
	`run_id` text,
	`kind` text NOT NULL,
	`at` integer NOT NULL,
	`detail` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `deadline_misses_once` ON `deadline_misses` (`subject`,`kind`);--> statement-breakpoint
CREATE INDEX `deadline_misses_run` ON `deadline_misses` (`run_id`);--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`token_id` text NOT NULL,
	`key` text NOT NULL,
	`route` text NOT NULL,
	`body_hash` text NOT NULL,
	`status` integer NOT NULL,
	`response` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`token_id`, `key`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_created` ON `idempotency_keys` (`created_at`);--> statement-breakpoint
CREATE TABLE `pipeline_runs` (
	`id` text PRIMARY KEY NOT NULL,
	`pipeline` text NOT NULL,
	`trigger` text NOT NULL,
	`scheduled_for` integer,
	`params` text NOT NULL,
	`definition` text NOT NULL,
	`state` text NOT NULL,
	`detail` text,
	`webhook_url` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`ended_at` integer,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `pipeline_runs_tick` ON `pipeline_runs` (`pipeline`,`scheduled_for`);--> statement-breakpoint
CREATE INDEX `pipeline_runs_state` ON `pipeline_runs` (`state`);--> statement-breakpoint
CREATE INDEX `pipeline_runs_created` ON `pipeline_runs` (`pipeline`,`created_at`);--> statement-breakpoint
CREATE TABLE `pipeline_schedules` (
	`pipeline` text PRIMARY KEY NOT NULL,
	`last_scheduled_for` integer,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`event` text NOT NULL,
	`url` text NOT NULL,
	`request_id` text,
	`run_id` text,
	`payload` text NOT NULL,
	`state` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`last_status` integer,
	`last_error` text,
	`created_at` integer NOT NULL,
	`delivered_at` integer,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_state` ON `webhook_deliveries` (`state`,`created_at`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_request` ON `webhook_deliveries` (`request_id`);--> statement-breakpoint
ALTER TABLE `job_requests` ADD `run_id` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `step` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `attempt` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `needs` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `webhook_url` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `deadlines` text;--> statement-breakpoint
CREATE INDEX `job_requests_run` ON `job_requests` (`run_id`,`step`);