"""Collection: sample an engine's endpoints (clients per dialect, bounded resumable jobs) and the two commands.

`plan` is what a collection is told (`CollectionPlan`, in parts); `dialects` the registry of dialect plugins
(`dialect_*`, each owning its options, flags and capabilities); `sampling` and `forcing` collect and teacher-force;
`campaign` runs `engine certify`'s rounds; `engine_certify` and `engine_collect` are the command lines.
"""
