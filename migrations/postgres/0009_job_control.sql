ALTER TABLE "schedflow"."job_requests" ADD COLUMN "held_at" bigint;--> statement-breakpoint
ALTER TABLE "schedflow"."job_requests" ADD COLUMN "held_by" text;--> statement-breakpoint
ALTER TABLE "schedflow"."job_requests" ADD COLUMN "spec_changed_at" bigint;