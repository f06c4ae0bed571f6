"""Collection: sample an engine's endpoints over HTTP (clients per dialect, bounded resumable jobs, the commands)."""
