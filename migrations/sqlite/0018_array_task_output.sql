ALTER TABLE `array_tasks` ADD `stdout_path` text;--> statement-breakpoint
ALTER TABLE `array_tasks` ADD `stderr_path` text;