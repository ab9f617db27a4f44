CREATE TABLE `array_tasks` (
	`request_id` text NOT NULL,
	`task_id` integer NOT NULL,
	`job_id` integer,
	`state` text NOT NULL,
	`reason` text,
	`exit_code` integer,
	`signal` integer,
	`started_at` integer,
	`ended_at` integer,
	`nodes` text,
	PRIMARY KEY(`request_id`, `task_id`)
);
--> statement-breakpoint
CREATE INDEX `array_tasks_state` ON `array_tasks` (`request_id`,`state`);--> statement-breakpoint
ALTER TABLE `job_requests` ADD `array_task_count` integer;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `array_retry_of` text;