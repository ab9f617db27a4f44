CREATE TABLE `accounting_jobs` (
	`profile` text NOT NULL,
	`job_id` integer NOT NULL,
	`request_id` text,
	`name` text NOT NULL,
	`account` text NOT NULL,
	`user` text NOT NULL,
	`partition` text NOT NULL,
	`state` text NOT NULL,
	`raw_state` text NOT NULL,
	`reason` text,
	`exit_code` integer,
	`signal` integer,
	`submit_time_sec` integer,
	`start_time_sec` integer,
	`end_time_sec` integer,
	`elapsed_sec` integer,
	`time_limit_min` integer,
	`nodes` text,
	`cpus` integer,
	`memory_per_node_mb` integer,
	`cpu_time_sec` real,
	`comment` text NOT NULL,
	`synced_at` integer NOT NULL,
	PRIMARY KEY(`profile`, `job_id`)
);
--> statement-breakpoint
CREATE INDEX `accounting_jobs_request` ON `accounting_jobs` (`request_id`);--> statement-breakpoint
CREATE INDEX `accounting_jobs_submit` ON `accounting_jobs` (`submit_time_sec`);--> statement-breakpoint
CREATE TABLE `job_requests` (
	`id` text PRIMARY KEY NOT NULL,
	`profile` text NOT NULL,
	`name` text NOT NULL,
	`spec` text NOT NULL,
	`origin` text NOT NULL,
	`state` text NOT NULL,
	`job_id` integer,
	`adopted` integer DEFAULT false NOT NULL,
	`raw_state` text,
	`reason` text,
	`exit_code` integer,
	`signal` integer,
	`error_code` text,
	`error_message` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`submit_attempt_at` integer,
	`submitted_at` integer,
	`started_at` integer,
	`ended_at` integer,
	`last_seen_at` integer,
	`last_seen_age_sec` integer,
	`last_seen_stale` integer,
	`missing_since` integer
);
--> statement-breakpoint
CREATE INDEX `job_requests_state` ON `job_requests` (`profile`,`state`);--> statement-breakpoint
CREATE UNIQUE INDEX `job_requests_job` ON `job_requests` (`profile`,`job_id`);--> statement-breakpoint
CREATE INDEX `job_requests_created` ON `job_requests` (`created_at`);--> statement-breakpoint
CREATE TABLE `job_transitions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`request_id` text NOT NULL,
	`from_state` text,
	`to_state` text NOT NULL,
	`at` integer NOT NULL,
	`source` text NOT NULL,
	`raw_state` text,
	`reason` text,
	`stale` integer DEFAULT false NOT NULL,
	`detail` text,
	FOREIGN KEY (`request_id`) REFERENCES `job_requests`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `job_transitions_request` ON `job_transitions` (`request_id`,`at`);--> statement-breakpoint
CREATE TABLE `profile_sync` (
	`profile` text PRIMARY KEY NOT NULL,
	`accounting_synced_to_sec` integer,
	`accounting_synced_at` integer,
	`last_poll_at` integer,
	`last_poll_ok` integer,
	`last_poll_error` text,
	`last_max_age_sec` integer,
	`updated_at` integer DEFAULT (unixepoch() * 1000) NOT NULL
);
