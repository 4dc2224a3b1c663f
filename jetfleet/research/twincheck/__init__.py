"""The twin held against real measurements (issue 26): real GPU-frequency sweeps of a Xavier NX and a Nano beside
the twin serving the same network the same way, with stated tolerances (docs/twin.md §5d)."""
