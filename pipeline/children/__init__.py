"""Steps of a stage run in a child process, so the memory they take returns to the system when they end."""
