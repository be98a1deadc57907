"""The `hookline serve` process supervisor: spawns, reaps and respawns the ingest and worker
processes, scales workers on SIGTTIN/SIGTTOU and speaks systemd's notify protocol.

Kept free of imports so that `import hookline.supervisor.cli` stays cheap; see
`hookline.supervisor.arbiter`.
"""
