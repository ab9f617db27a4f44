ALTER TABLE `pipeline_runs` ADD `cancel_requested_at` integer;--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `cancelled_by` text;