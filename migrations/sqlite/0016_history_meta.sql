CREATE TABLE `history_meta` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
