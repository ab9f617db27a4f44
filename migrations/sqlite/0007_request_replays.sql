CREATE TABLE `request_replays` (
	`request_id` text NOT NULL,
	`token_name` text NOT NULL,
	`key` text NOT NULL,
	`count` integer NOT NULL,
	`first_at` integer NOT NULL,
	`last_at` integer NOT NULL,
	PRIMARY KEY(`request_id`, `token_name`, `key`),
	FOREIGN KEY (`request_id`) REFERENCES `job_requests`(`id`) ON UPDATE no action ON DELETE cascade
);
