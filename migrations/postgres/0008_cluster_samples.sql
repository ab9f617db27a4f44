CREATE TABLE "schedflow"."cluster_samples" (
	"profile" text NOT NULL,
	"partition" text NOT NULL,
	"at" bigint NOT NULL,
	"cpus_total" bigint NOT NULL,
	"cpus_allocated" bigint NOT NULL,
	"cpus_idle" bigint NOT NULL,
	"cpus_other" bigint NOT NULL,
	"jobs_running" bigint NOT NULL,
	"jobs_pending" bigint NOT NULL,
	CONSTRAINT "cluster_samples_profile_partition_at_pk" PRIMARY KEY("profile","partition","at")
);
--> statement-breakpoint
CREATE INDEX "cluster_samples_at" ON "schedflow"."cluster_samples" USING btree ("at");