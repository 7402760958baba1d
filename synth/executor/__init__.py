"""Executors only know task ranks; a task makes its sessions and writes its own shard files."""
