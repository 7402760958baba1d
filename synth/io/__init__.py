"""Reading and writing files: configs, audio, shards, run folders."""
