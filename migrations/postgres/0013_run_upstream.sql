ALTER TABLE "schedflow"."pipeline_runs" ADD COLUMN "upstream_run_id" text;--> statement-breakpoint
ALTER TABLE "schedflow"."pipeline_runs" ADD COLUMN "upstream_attempt" bigint;--> statement-breakpoint
ALTER TABLE "schedflow"."pipeline_runs" ADD COLUMN "downstream_checked_at" bigint;--> statement-breakpoint
-- Runs that ended before pipelines could follow others have nothing to start.
UPDATE "schedflow"."pipeline_runs" SET "downstream_checked_at" = "updated_at" WHERE "state" IN ('succeeded', 'failed', 'cancelled', 'skipped');--> statement-breakpoint
CREATE UNIQUE INDEX "pipeline_runs_upstream" ON "schedflow"."pipeline_runs" USING btree ("pipeline","upstream_run_id","upstream_attempt");--> statement-breakpoint
CREATE INDEX "pipeline_runs_downstream_todo" ON "schedflow"."pipeline_runs" USING btree ("ended_at") WHERE "downstream_checked_at" is null;