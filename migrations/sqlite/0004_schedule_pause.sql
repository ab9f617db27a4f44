ALTER TABLE `pipeline_schedules` ADD `paused_at` integer;--> statement-breakpoint
ALTER TABLE `pipeline_schedules` ADD `paused_by` text;