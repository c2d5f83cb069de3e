"""Log files: read by byte ranges, lines understood, windows dated and merged, what the Logs page shows."""
