ALTER TABLE `profile_sync` ADD `last_poll_age_sec` integer;--> statement-breakpoint
ALTER TABLE `profile_sync` ADD `last_poll_stale` integer;