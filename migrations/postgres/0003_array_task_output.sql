ALTER TABLE "schedflow"."array_tasks" ADD COLUMN "stdout_path" text;--> statement-breakpoint
ALTER TABLE "schedflow"."array_tasks" ADD COLUMN "stderr_path" text;