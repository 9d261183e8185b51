"""``vispe dataset <name>``: the commands that write vispe's data sets."""
