ALTER TABLE `pipeline_runs` ADD `upstream_run_id` text;--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `upstream_attempt` integer;--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `downstream_checked_at` integer;--> statement-breakpoint
-- Runs that ended before pipelines could follow others have nothing to start.
UPDATE `pipeline_runs` SET `downstream_checked_at` = `updated_at` WHERE `state` IN ('succeeded', 'failed', 'cancelled', 'skipped');--> statement-breakpoint
CREATE UNIQUE INDEX `pipeline_runs_upstream` ON `pipeline_runs` (`pipeline`,`upstream_run_id`,`upstream_attempt`);--> statement-breakpoint
CREATE INDEX `pipeline_runs_downstream_todo` ON `pipeline_runs` (`ended_at`) WHERE "downstream_checked_at" is null;