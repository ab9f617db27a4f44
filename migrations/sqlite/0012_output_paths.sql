ALTER TABLE `job_requests` ADD `stdout_path` text;--> statement-breakpoint
ALTER TABLE `job_requests` ADD `stderr_path` text;