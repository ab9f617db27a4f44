CREATE TABLE `cluster_samples` (
	`profile` text NOT NULL,
	`partition` text NOT NULL,
	`at` integer NOT NULL,
	`cpus_total` integer NOT NULL,
	`cpus_allocated` integer NOT NULL,
	`cpus_idle` integer NOT NULL,
	`cpus_other` integer NOT NULL,
	`jobs_running` integer NOT NULL,
	`jobs_pending` integer NOT NULL,
	PRIMARY KEY(`profile`, `partition`, `at`)
);
--> statement-breakpoint
CREATE INDEX `cluster_samples_at` ON `cluster_samples` (`at`);