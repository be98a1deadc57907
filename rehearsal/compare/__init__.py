"""`hookline bench --compare`: the same webhook workload through hookline, Celery (Redis
broker) and Huey (SQLite storage), measured the same way; see rehearsal/compare/run.py."""
