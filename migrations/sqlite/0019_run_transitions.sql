CREATE TABLE `run_transitions` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`run_id` text NOT NULL,
	`from_state` text,
	`to_state` text NOT NULL,
	`at` integer NOT NULL,
	`source` text NOT NULL,
	`detail` text,
	FOREIGN KEY (`run_id`) REFERENCES `pipeline_runs`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `run_transitions_run` ON `run_transitions` (`run_id`,`at`);