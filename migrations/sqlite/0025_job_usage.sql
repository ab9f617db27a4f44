CREATE TABLE `job_usage` (
	`request_id` text PRIMARY KEY NOT NULL,
	`profile` text NOT NULL,
	`job_id` integer,
	`run_id` text,
	`step` text,
	`attempt` integer NOT NULL,
	`state` text NOT NULL,
	`elapsed_sec` integer,
	`time_limit_min` integer,
	`time_limit_infinite` integer DEFAULT false NOT NULL,
	`cpus` integer,
	`cpu_time_sec` real,
	`peak_memory_mb` integer,
	`spec` text NOT NULL,
	`ended_at` integer,
	`kept_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `job_usage_run` ON `job_usage` (`run_id`,`step`);