"""Wake a job when its pods change: the runtime never reconciles a job for its pods."""
