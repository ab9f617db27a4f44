ALTER TABLE `profile_sync` ADD `accounting_ok` integer;--> statement-breakpoint
ALTER TABLE `profile_sync` ADD `accounting_error` text;--> statement-breakpoint
ALTER TABLE `profile_sync` ADD `accounting_checked_at` integer;