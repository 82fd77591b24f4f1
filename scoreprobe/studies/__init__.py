"""Many training runs: the recipes the studies share (`recipes`), one run start to end (`runner`), the queue
that runs them (`queue`), their compact exports (`export`), reading the exports back and writing a study's
report (`presets`, `format`)."""
