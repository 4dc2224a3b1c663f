"""Which controller acts: one per SQLite data directory (a file lock), one leader per Redis prefix (a lease with
a fencing token); the others stand by (docs/standby.md)."""
