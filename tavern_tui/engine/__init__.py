"""The session event log, the inbox and one agent step. Knows nothing of SillyTavern formats."""
