"""What starts a task without a caller: schedules (cron or interval, with catch-up and overlap
rules) and webhooks (signed HTTP posts into a template).  Pure cores; the supervisor carries them."""
