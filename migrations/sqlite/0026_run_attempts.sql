ALTER TABLE `job_requests` ADD `run_attempt` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `pipeline_runs` ADD `attempt` integer DEFAULT 1 NOT NULL;