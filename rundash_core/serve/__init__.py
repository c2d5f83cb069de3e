"""Starting and finding the dashboard: the `rundash` CLI, the launcher, running instances, guided start, deep links."""
