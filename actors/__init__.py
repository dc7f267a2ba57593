"""The Thespian runtime of Pegasus: system start/attach/shutdown, supervisor,
task actors, stage pools and workers.  Thespian's camelCase names stay in here."""
