CREATE TABLE "schedflow"."job_usage" (
	"request_id" text PRIMARY KEY NOT NULL,
	"profile" text NOT NULL,
	"job_id" bigint,
	"run_id" text,
	"step" text,
	"attempt" bigint NOT NULL,
	"state" text NOT NULL,
	"elapsed_sec" bigint,
	"time_limit_min" bigint,
	"time_limit_infinite" boolean DEFAULT false NOT NULL,
	"cpus" bigint,
	"cpu_time_sec" double precision,
	"peak_memory_mb" bigint,
	"spec" jsonb NOT NULL,
	"ended_at" bigint,
	"kept_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "job_usage_run" ON "schedflow"."job_usage" USING btree ("run_id","step");