"""The operator's companion process: job counters and the wake watcher, beside the runtime."""
